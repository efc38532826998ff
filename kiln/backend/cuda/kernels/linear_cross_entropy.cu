// Fused linear cross-entropy on CUDA, with the CPU kernel's structure
// (kiln/backend/cpu/linear_cross_entropy.cc): the vocabulary is cut into
// tiles; each tile's logits (h @ w_tile^T, a cuBLASLt product into one
// [tokens, tile] f32 scratch block) are folded into each row's running max
// and sum of exponentials, and the target's logit is picked out, so the
// [tokens, vocab] logits never exist. The backward recomputes each tile's
// logits, forms G = softmax * dsoft - onehot * dtarget, adds G @ w_tile to
// dh and writes G^T @ h to the tile's rows of dw.
//
// Products take the inputs' dtype with f32 accumulation (f64 for f64): for
// bf16/f16 inputs the logits come out in f32 and G is rounded to the input
// dtype for the two products, as bf16 compute does. A tile is at most 8192
// columns, fewer where the [tokens, tile] block would pass 256 MiB.
// Targets are checked on the device: a bad one is reported as an error
// when the stream next synchronises. The row kernels are in
// linear_cross_entropy.cuh.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

#include "kiln/backend/cuda/dense_gemm.h"
#include "kiln/backend/cuda/kernels/linear_cross_entropy.cuh"
#include "kiln/backend/cuda/scratch.h"
#include "kiln/runtime/allocator.h"

namespace kiln::cuda {
namespace {

using namespace lce;

constexpr long long kBlockBytes = (long long)(256) << 20;  // the logits block, at most
constexpr long long kMaxTile = 8192;                          // vocabulary columns per tile

Targets targets_of(const KernelArgs& a, long long vocab) {
  const TensorRef& t = a.in[2];
  KILN_CHECK(t.dtype == DType::i32 || t.dtype == DType::i64, a.op.name,
             " (CUDA): targets must be i32 or i64, got ", dtype_name(t.dtype));
  return {t.data, t.dtype == DType::i64, a.attrs.i("ignore_index"), vocab, index_fault_slot()};
}

unsigned row_blocks(long long rows) { return unsigned((rows + kRowsPerBlock - 1) / kRowsPerBlock); }

// The shapes and the vocabulary tile both passes share.
struct Shapes {
  long long rows, dim, vocab, tile;
  Shapes(long long rows, long long dim, long long vocab) : rows(rows), dim(dim), vocab(vocab) {
    const long long fit = kBlockBytes / (std::max(rows, 1LL) * 4);
    tile = std::min({vocab, kMaxTile, std::max(256LL, fit / 128 * 128)});
  }
  template <class Operands>  // KernelArgs or PrepareArgs
  explicit Shapes(const Operands& a) : Shapes(a.in[0].shape[0], a.in[0].shape[1], a.in[1].shape[0]) {}
};

// The scratch pieces each pass carves, in order: the forward's logits
// block, its four row vectors and the GEMMs' workspace; the backward's
// logits block, G and dh where they are not stored in place, and the
// workspace.
template <class T, class C>
std::vector<size_t> forward_pieces(const Shapes& s) {
  const size_t row = size_t(s.rows) * sizeof(C);
  return {size_t(s.rows * s.tile) * sizeof(C), row, row, row, row, size_t(s.dim ? kGemmWorkspace : 0)};
}
template <class T, class C>
std::vector<size_t> backward_pieces(const Shapes& s) {
  if (s.rows == 0 || s.dim == 0 || s.vocab == 0) return {};  // no products
  constexpr bool direct = std::is_same_v<T, C>;  // dh accumulates in the output
  return {size_t(s.rows * s.tile) * sizeof(C), direct ? 0 : size_t(s.rows * s.tile) * sizeof(T),
          direct ? 0 : size_t(s.rows * s.dim) * sizeof(C), size_t(kGemmWorkspace)};
}

size_t aligned(size_t b) { return (b + 255) / 256 * 256; }

size_t carved_bytes(const std::vector<size_t>& pieces) {
  size_t total = 0;
  for (size_t b : pieces) total += aligned(b);
  return total;
}

// One scratch block, carved into the aligned pieces in order.
class Carver {
 public:
  explicit Carver(const std::vector<size_t>& pieces) : scratch_(carved_bytes(pieces)) {}
  template <class X>
  X* take(size_t count) {
    X* p = reinterpret_cast<X*>(scratch_.as() + at_);
    at_ += aligned(count * sizeof(X));
    return p;
  }

 private:
  Scratch scratch_;
  size_t at_ = 0;
};

// logits[rows, width] = h @ w[v0 .. v0 + width]^T, in the compute type.
template <class T, class C>
void tile_logits(const KernelArgs& a, const Shapes& s, long long v0, long long width, C* logits,
                 void* workspace) {
  dense_gemm({.in = a.in[0].dtype, .out = dtype_of<C>::value, .transpose_b = true, .m = s.rows,
              .n = width, .k = s.dim, .a = a.in[0].data, .lda = s.dim,
              .b = a.in[1].ptr<const T>() + v0 * s.dim, .ldb = s.dim, .c = logits, .ldc = width,
              .workspace = workspace});
}

void forward(const KernelArgs& a) {
  visit_floating_storage(a.in[0].dtype, "linear_cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const Shapes s(a);
    const Targets targets = targets_of(a, s.vocab);
    const std::string& reduction = a.attrs.s("reduction");
    C* lse = a.out[1].ptr<C>();
    Carver carve(forward_pieces<T, C>(s));
    C* logits = carve.take<C>(size_t(s.rows * s.tile));
    C *m = carve.take<C>(size_t(s.rows)), *l = carve.take<C>(size_t(s.rows));
    C *picked = carve.take<C>(size_t(s.rows)), *row_loss = carve.take<C>(size_t(s.rows));
    void* workspace = carve.take<char>(s.dim ? kGemmWorkspace : 0);
    launch_n(start_rows_k<C>, s.rows, m, l, picked);
    for (long long v0 = 0; v0 < s.vocab && s.rows > 0; v0 += s.tile) {
      const long long width = std::min(s.tile, s.vocab - v0);
      if (s.dim > 0) {
        tile_logits<T, C>(a, s, v0, width, logits, workspace);
      } else {
        KILN_CUDA_CHECK(cudaMemsetAsync(logits, 0, size_t(s.rows * width) * sizeof(C), current_stream()));
      }
      fold_tile_k<C><<<row_blocks(s.rows), 32 * kRowsPerBlock, 0, current_stream()>>>(
          logits, width, v0, targets, m, l, picked, s.rows);
      KILN_CUDA_CHECK_LAUNCH();
    }
    C* out = a.out[0].ptr<C>();
    launch_n(finish_rows_k<C>, s.rows, m, l, picked, targets, lse,
             reduction == "none" ? out : row_loss);
    if (reduction != "none") {
      reduce_k<C><<<1, 32, 0, current_stream()>>>(row_loss, targets, reduction == "mean", out,
                                                   s.rows);
      KILN_CUDA_CHECK_LAUNCH();
    }
  });
}

void backward(const KernelArgs& a) {
  visit_floating_storage(a.in[0].dtype, "linear_cross_entropy_backward", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const Shapes s(a);
    const Targets targets = targets_of(a, s.vocab);
    const C *lse = a.in[3].ptr<C>(), *dsoft = a.in[4].ptr<C>(), *dtarget = a.in[5].ptr<C>();
    T *dh_out = a.out[0].ptr<T>(), *dw_out = a.out[1].ptr<T>();
    cudaStream_t stream = current_stream();
    if (s.rows == 0 || s.dim == 0 || s.vocab == 0) {  // no products: the sums are empty
      KILN_CUDA_CHECK(cudaMemsetAsync(dh_out, 0, size_t(s.rows * s.dim) * sizeof(T), stream));
      KILN_CUDA_CHECK(cudaMemsetAsync(dw_out, 0, size_t(s.vocab * s.dim) * sizeof(T), stream));
      return;
    }
    // dh accumulates over tiles in C: in the output itself when it is C.
    constexpr bool direct = std::is_same_v<T, C>;
    Carver carve(backward_pieces<T, C>(s));
    C* logits = carve.take<C>(size_t(s.rows * s.tile));
    T* g = direct ? reinterpret_cast<T*>(logits) : carve.take<T>(size_t(s.rows * s.tile));
    C* dh = direct ? reinterpret_cast<C*>(dh_out) : carve.take<C>(size_t(s.rows * s.dim));
    void* workspace = carve.take<char>(kGemmWorkspace);
    for (long long v0 = 0; v0 < s.vocab; v0 += s.tile) {
      const long long width = std::min(s.tile, s.vocab - v0);
      tile_logits<T, C>(a, s, v0, width, logits, workspace);
      launch_n(grad_tile_k<T, C>, s.rows * width, logits, g, width, v0, targets, lse, dsoft,
               dtarget);
      // dh (+)= G @ w_tile; dw_tile = G^T @ h.
      dense_gemm({.in = a.in[0].dtype, .out = dtype_of<C>::value, .m = s.rows, .n = s.dim, .k = width,
                  .a = g, .lda = width, .b = a.in[1].ptr<const T>() + v0 * s.dim, .ldb = s.dim,
                  .c = dh, .ldc = s.dim, .accumulate = v0 > 0, .workspace = workspace});
      dense_gemm({.in = a.in[0].dtype, .out = a.in[0].dtype, .transpose_a = true, .m = width,
                  .n = s.dim, .k = s.rows, .a = g, .lda = width, .b = a.in[0].data, .ldb = s.dim,
                  .c = dw_out + v0 * s.dim, .ldc = s.dim, .workspace = workspace});
    }
    if (!direct) launch_n(narrow_k<T, C>, s.rows * s.dim, dh, dh_out);
  });
}

// Kernel::scratch_bytes: the block each pass carves, in its size class.
int64_t scratch_bytes(const PrepareArgs& a) {
  int64_t bytes = 0;
  visit_floating_storage(a.in[0].dtype, a.op.name.c_str(), [&](auto tag) {
    using T = decltype(tag);
    const Shapes s(a);
    const bool backward = a.op.name == "linear_cross_entropy_backward";
    bytes = int64_t(CachingAllocator::round_size(carved_bytes(
        backward ? backward_pieces<T, compute_t<T>>(s) : forward_pieces<T, compute_t<T>>(s))));
  });
  return bytes;
}

const KernelRegistrar registrations[] = {
    {DeviceKind::cuda, "linear_cross_entropy",
     {.fn = forward, .strided_inputs = false, .scratch_bytes = scratch_bytes}},
    {DeviceKind::cuda, "linear_cross_entropy_backward",
     {.fn = backward, .strided_inputs = false, .scratch_bytes = scratch_bytes}},
};

}  // namespace
}  // namespace kiln::cuda
