// Fused linear cross-entropy on the CPU. The vocabulary is cut into tiles of
// kTile columns; for each tile the logits of every token (h @ w_tile^T) are
// computed into one [tokens, kTile] scratch block, folded into each row's
// running max and sum of exponentials, and the target's logit is picked
// out. The [tokens, vocab] logits never exist. The backward recomputes each
// tile's logits, forms G = softmax * dsoft - onehot * dtarget in place and
// adds G @ w_tile to dh and writes G^T @ h to the tile's rows of dw.
// The products run as parallel_gemm (fixed blocks, each summed whole by one
// thread) and the row updates one row per thread, so results do not depend
// on the thread count. bf16/f16 inputs multiply as 16-bit values with f32
// accumulation (as they are where the CPU has native 16-bit products, else
// widened to f32), the logits are f32, and G is rounded to the inputs' type
// for its two products, as bf16 compute (and the CUDA kernel) rounds it.
#include <cmath>
#include <limits>
#include <optional>
#include <type_traits>
#include <vector>

#include "kiln/backend/cpu/gemm.h"
#include "kiln/backend/cpu/isa.h"
#include "kiln/backend/cpu/kernel_helpers.h"
#include "kiln/codegen/math.h"
#include "kiln/base/error.h"

namespace kiln::cpu {
namespace {

constexpr int64_t kTile = 4096;  // vocabulary columns per tile
constexpr int64_t kRows = 16;    // rows per task of the row-wise passes

// Targets, each checked to be a class index or ignore_index.
std::vector<int64_t> checked_targets(const KernelArgs& a, int64_t vocab) {
  std::vector<int64_t> t = int_values(a.in[2]);
  int64_t ignore = a.attrs.i("ignore_index");
  for (size_t i = 0; i < t.size(); ++i)
    KILN_CHECK(t[i] == ignore || (t[i] >= 0 && t[i] < vocab), a.op.name, ": target ", t[i],
               " at position ", i, " is out of range for a vocabulary of ", vocab,
               " (valid: 0..", vocab - 1, ", or ignore_index ", ignore, ")");
  return t;
}

// What both passes set up: h as the products' operands (O; converted once
// unless stored as O), w tile by tile, the targets and the logits scratch
// block (C).
template <class C, class O>
struct Setup {
  int64_t rows, dim, vocab, tile;
  std::vector<int64_t> targets;
  AsCompute<O> h;
  const TensorRef& w;
  std::optional<Scratch<O>> w_buffer;  // one tile of w converted, unless w is stored as O
  Scratch<C> block;                    // [rows, tile] logits

  explicit Setup(const KernelArgs& a)
      : rows(a.in[0].shape[0]), dim(a.in[0].shape[1]), vocab(a.in[1].shape[0]),
        tile(std::min(kTile, vocab)), targets(checked_targets(a, vocab)), h(a.in[0]),
        w(a.in[1]), block(rows * tile) {
    if (!stored_as<O>(w.dtype)) w_buffer.emplace(tile * dim);
  }
  // The weight rows [v0, v0 + n) as O.
  const O* weights(int64_t v0, int64_t n) {
    if (!w_buffer) return w.ptr<O>() + v0 * dim;
    O* out = w_buffer->data();
    parallel_for(n * dim, 1,
                 [&](int64_t b, int64_t e) { load_compute(w, v0 * dim + b, e - b, out + b); });
    return out;
  }
  // The logits of every row against the tile's weights, into the block
  // ([rows, width], row stride width).
  C* logits(const O* wt, int64_t width) {
    parallel_gemm({false, true, rows, width, dim, dim, dim, width}, C(1), h.data(), wt, C(0),
                  block.data());
    return block.data();
  }
};

// Calls f(row) for every row, in parallel; a row costs `width` iterations.
template <class F>
void for_rows(int64_t rows, int64_t width, F f) {
  parallel_for(rows, width, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) f(r);
  });
}

template <class C, class O>
void forward(const KernelArgs& a) {
  Setup<C, O> s(a);
  const C ninf = -std::numeric_limits<C>::infinity();
  std::vector<C> m(size_t(s.rows), ninf), l(size_t(s.rows), C(0)), picked(size_t(s.rows), C(0));
  for (int64_t v0 = 0; v0 < s.vocab; v0 += s.tile) {
    int64_t width = std::min(s.tile, s.vocab - v0);
    C* block = s.logits(s.weights(v0, width), width);
    for_rows(s.rows, width, [&](int64_t r) {
      C* z = block + r * width;
      int64_t t = s.targets[size_t(r)] - v0;
      if (t >= 0 && t < width) picked[size_t(r)] = z[t];
      online_softmax_row(z, width, m[size_t(r)], l[size_t(r)]);
    });
  }
  int64_t ignore = a.attrs.i("ignore_index");
  const std::string& reduction = a.attrs.s("reduction");
  C* loss = a.out[0].ptr<C>();
  C* lse = a.out[1].ptr<C>();
  double total = 0, count = 0;  // in index order
  for (int64_t r = 0; r < s.rows; ++r) {
    lse[r] = m[size_t(r)] + codegen::math::log(l[size_t(r)]);
    bool valid = s.targets[size_t(r)] != ignore;
    C row_loss = valid ? lse[r] - picked[size_t(r)] : C(0);
    if (reduction == "none") loss[r] = row_loss;
    total += double(row_loss);
    count += valid ? 1 : 0;
  }
  if (reduction == "sum") loss[0] = C(total);
  if (reduction == "mean") loss[0] = C(total / count);  // NaN without targets, as torch
}

template <class C, class T, class O>
void backward(const KernelArgs& a) {
  Setup<C, O> s(a);
  const C *lse = a.in[3].ptr<C>(), *dsoft = a.in[4].ptr<C>(), *dtarget = a.in[5].ptr<C>();
  int64_t ignore = a.attrs.i("ignore_index");
  const TensorRef &dh_out = a.out[0], &dw_out = a.out[1];
  // dh accumulates over tiles in C, and each tile's dw rows are computed in
  // C: in the outputs themselves when they are C, else in scratch.
  const bool direct = stored_as<C>(dh_out.dtype);  // h and w share the dtype
  std::optional<Scratch<C>> dh_buffer, dw_buffer;
  if (!direct) {
    dh_buffer.emplace(s.rows * s.dim);
    dw_buffer.emplace(s.tile * s.dim);
  }
  std::optional<Scratch<O>> g_rounded;  // G as the operands, where they are not C
  if constexpr (!std::is_same_v<O, C>) g_rounded.emplace(s.rows * s.tile);
  C* dh = direct ? dh_out.ptr<C>() : dh_buffer->data();
  std::fill(dh, dh + s.rows * s.dim, C(0));

  for (int64_t v0 = 0; v0 < s.vocab; v0 += s.tile) {
    int64_t width = std::min(s.tile, s.vocab - v0);
    const O* wt = s.weights(v0, width);
    // G = softmax * dsoft - onehot * dtarget, over the logits in place.
    C* g = s.logits(wt, width);
    O* rounded = g_rounded ? g_rounded->data() : nullptr;
    for_rows(s.rows, width, [&](int64_t r) {
      C* z = g + r * width;
      C shift = lse[r], coef = dsoft[r];
      for (int64_t c = 0; c < width; ++c) z[c] = codegen::math::exp(z[c] - shift) * coef;
      int64_t t = s.targets[size_t(r)];
      if (t != ignore && t >= v0 && t < v0 + width) z[t - v0] -= dtarget[r];
      as_operand<T>(z, 1, width, width, rounded ? rounded + r * width : nullptr);
    });
    const O* gt;  // G's rows rounded in place, or into `rounded`
    if constexpr (std::is_same_v<O, C>) gt = g;
    else gt = rounded;
    parallel_gemm({false, false, s.rows, s.dim, width, width, s.dim, s.dim}, C(1), gt, wt, C(1),
                  dh);
    C* dw = direct ? dw_out.ptr<C>() + v0 * s.dim : dw_buffer->data();
    parallel_gemm({true, false, width, s.dim, s.rows, width, s.dim, s.dim}, C(1), gt,
                  s.h.data(), C(0), dw);
    if (!direct)
      parallel_for(width * s.dim, 1, [&](int64_t b, int64_t e) {
        store_row(dw_out, v0 * s.dim + b, dw + b, e - b);
      });
  }
  if (!direct)
    parallel_for(s.rows * s.dim, 1,
                 [&](int64_t b, int64_t e) { store_row(dh_out, b, dh + b, e - b); });
}

// The scratch buffers Setup and backward take from the pool.
int64_t scratch_bytes(const PrepareArgs& a) {
  const ir::TypeInfo &h = a.in[0], &w = a.in[1];
  const int64_t rows = h.shape[0], dim = h.shape[1], tile = std::min(kTile, w.shape[0]);
  const bool backward = a.op.name == "linear_cross_entropy_backward";
  int64_t bytes = 0;
  by_operand_type(h.dtype, [&]<class C, class T, class O>() {
    bytes = scratch_block<C>(rows * tile);                                  // block
    if (!stored_as<O>(w.dtype)) bytes += scratch_block<O>(tile * dim);      // w_buffer
    if (!stored_as<O>(h.dtype)) bytes += scratch_block<O>(rows * dim);      // h as O
    if (backward && !stored_as<C>(h.dtype))                                 // dh_buffer, dw_buffer
      bytes += scratch_block<C>(rows * dim) + scratch_block<C>(tile * dim);
    if (backward && !std::is_same_v<O, C>) bytes += scratch_block<O>(rows * tile);  // g_rounded
  });
  return bytes;
}

void forward_kernel(const KernelArgs& a) {
  by_operand_type(a.in[0].dtype, [&]<class C, class T, class O>() { forward<C, O>(a); });
}

void backward_kernel(const KernelArgs& a) {
  by_operand_type(a.in[0].dtype, [&]<class C, class T, class O>() { backward<C, T, O>(a); });
}

const IsaKernelRegistrar registrations[] = {
    {DeviceKind::cpu, "linear_cross_entropy",
     {.fn = forward_kernel, .strided_inputs = false, .scratch_bytes = scratch_bytes}},
    {DeviceKind::cpu, "linear_cross_entropy_backward",
     {.fn = backward_kernel, .strided_inputs = false, .scratch_bytes = scratch_bytes}},
};

}  // namespace
}  // namespace kiln::cpu
