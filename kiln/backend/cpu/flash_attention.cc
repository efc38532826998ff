// Flash attention on the CPU. Queries and keys are cut into blocks; a task
// owns one block of output rows and walks the key blocks with an online
// softmax (running max and sum per row), so no q_len x kv_len scores exist,
// only a block of them per thread. Block pairs the mask rules out entirely
// are skipped; pairs it covers entirely skip the per-element mask.
//
// The backward recomputes the probabilities block by block from the saved
// log-sum-exp. With enough (batch, kv head) pairs to share the threads, one
// task per pair computes P and dS once per block pair and accumulates dK,
// dV and dQ together; else two passes: one task per (kv head, key block)
// accumulates dK and dV over its query heads and blocks, one task per query
// block accumulates dQ over the key blocks. Every gradient element is summed
// by one thread in the same order either way: no atomics, same bits for any
// thread count.
// bf16/f16 inputs multiply as 16-bit values with f32 accumulation (as they
// are where the CPU has native 16-bit products, else widened to f32 once);
// the scores, softmax statistics and accumulators are f32, and the
// probabilities and dS are rounded to the inputs' type for their products,
// as the composite and the CUDA kernels round them.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "kiln/backend/cpu/gemm.h"
#include "kiln/backend/cpu/isa.h"
#include "kiln/backend/cpu/kernel_helpers.h"
#include "kiln/codegen/math.h"
#include "kiln/base/error.h"

namespace kiln::cpu {
namespace {

constexpr int64_t kBlockQ = 128, kBlockK = 128;

template <class C>
struct Problem {
  int64_t batch, q_heads, kv_heads, q_len, kv_len, head_dim, v_dim;
  bool causal;
  int64_t window;
  C scale;
  int64_t offset;                // query i sits at key position i + offset
  std::vector<int64_t> doc;      // [batch, seq] document ids; empty for none
  int64_t group() const { return q_heads / kv_heads; }
  int64_t q_blocks() const { return (q_len + kBlockQ - 1) / kBlockQ; }
  int64_t k_blocks() const { return (kv_len + kBlockK - 1) / kBlockK; }
};

template <class C>
Problem<C> problem(const KernelArgs& a, const TensorRef* doc) {
  const Shape &q = a.in[0].shape, &k = a.in[1].shape, &v = a.in[2].shape;
  Problem<C> p{q[0], q[1], k[1], q[2], k[2], q[3], v[3], a.attrs.b("causal"),
               a.attrs.i("sliding_window"), C(a.attrs.f("scale")), k[2] - q[2], {}};
  if (doc) p.doc = int_values(*doc);
  return p;
}

enum class Cover { none, partial, full };

// Whether queries [i0, i1) may attend keys [j0, j1) of batch b: not at all,
// in part, or every pair.
template <class C>
Cover cover(const Problem<C>& p, int64_t b, int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
  bool full = true;
  if (p.causal) {
    int64_t first = i0 + p.offset, last = i1 - 1 + p.offset;
    if (j0 > last) return Cover::none;
    full = j1 - 1 <= first;
    if (p.window > 0) {
      // Query position P sees keys P - window < j <= P: key j is seen by
      // some query when j > first - window, by all when j > last - window.
      if (j1 - 1 <= first - p.window) return Cover::none;
      full = full && j0 > last - p.window;
    }
  }
  if (!p.doc.empty()) {
    const int64_t* ids = p.doc.data() + b * p.q_len;
    auto [qlo, qhi] = std::minmax_element(ids + i0, ids + i1);
    auto [klo, khi] = std::minmax_element(ids + j0, ids + j1);
    if (*qhi < *klo || *khi < *qlo) return Cover::none;
    full = full && *qlo == *qhi && *klo == *khi && *qlo == *klo;
  }
  return full ? Cover::full : Cover::partial;
}

// The columns [lo, hi) of the key block [j0, j0 + bk) that the causal
// window lets query i see (all of them without one).
template <class C>
Cols window_cols(const Problem<C>& p, Cover cv, int64_t i, int64_t j0, int64_t bk) {
  if (!p.causal || cv == Cover::full) return {0, bk};
  const int64_t pos = i + p.offset;
  const int64_t hi = std::clamp<int64_t>(pos - j0 + 1, 0, bk);
  return {p.window > 0 ? std::clamp<int64_t>(pos - p.window + 1 - j0, 0, hi) : 0, hi};
}

// Sets s[r * ld + c] to -inf where query i0 + r may not see key j0 + c:
// outside the row's causal window (a range of columns), then where the
// documents differ.
template <class C>
void apply_mask(const Problem<C>& p, int64_t b, int64_t i0, int64_t bq, int64_t j0, int64_t bk,
                C* s, int64_t ld) {
  const C ninf = -std::numeric_limits<C>::infinity();
  const int64_t* ids = p.doc.empty() ? nullptr : p.doc.data() + b * p.q_len;
  for (int64_t r = 0; r < bq; ++r) {
    C* row = s + r * ld;
    const auto [lo, hi] = window_cols(p, Cover::partial, i0 + r, j0, bk);
    std::fill(row, row + lo, ninf);
    std::fill(row + hi, row + bk, ninf);
    if (ids)
      for (int64_t c = lo; c < hi; ++c)
        if (ids[i0 + r] != ids[j0 + c]) row[c] = ninf;
  }
}

// The backward's P and dS blocks, in one buffer with dS 1 KiB past P's
// end: apart, the allocator puts them a multiple of 4 KiB apart, and every
// load of dS then waits on the store to P with the same low address bits
// (4K aliasing; this took a third of the backward's time).
template <class C>
struct ScoreBlocks {
  static constexpr int64_t kGap = 1024 / sizeof(C);
  std::vector<C> both = std::vector<C>(2 * kBlockQ * kBlockK + kGap);
  C* p() { return both.data(); }
  C* ds() { return both.data() + kBlockQ * kBlockK + kGap; }
};

// A block of scratch for a product's rounded operand (none where the
// operands are C: it is rounded in place).
template <class C, class O>
std::vector<O> rounding_buffer() {
  return std::vector<O>(std::is_same_v<O, C> ? 0 : kBlockQ * kBlockK);
}

template <class C, class T, class O>
void forward(const KernelArgs& a) {
  Problem<C> p = problem<C>(a, a.in.size() == 4 ? &a.in[3] : nullptr);
  AsCompute<O> q(a.in[0]), k(a.in[1]), v(a.in[2]);
  const TensorRef& out = a.out[0];
  C* lse = a.out[1].ptr<C>();
  const int64_t D = p.head_dim, Dv = p.v_dim, nq = p.q_blocks(), nk = p.k_blocks();
  const C ninf = -std::numeric_limits<C>::infinity();
  const int64_t q_task = kBlockQ * p.kv_len * (D + Dv);  // multiply-adds per task
  parallel_for(p.batch * p.q_heads * nq, q_task, [&](int64_t begin, int64_t end) {
    std::vector<C> s(kBlockQ * kBlockK), o(kBlockQ * Dv), m(kBlockQ), l(kBlockQ);
    std::vector<O> rounded = rounding_buffer<C, O>();
    for (int64_t task = begin; task < end; ++task) {
      int64_t b = task / (p.q_heads * nq), h = task / nq % p.q_heads, i0 = task % nq * kBlockQ;
      int64_t bq = std::min(kBlockQ, p.q_len - i0);
      int64_t row0 = (b * p.q_heads + h) * p.q_len + i0;  // first output row
      int64_t kv = b * p.kv_heads + h / p.group();
      const O* qp = q.data() + row0 * D;
      std::fill(o.begin(), o.end(), C(0));
      std::fill(m.begin(), m.end(), ninf);
      std::fill(l.begin(), l.end(), C(0));
      for (int64_t kb = 0; kb < nk; ++kb) {
        int64_t j0 = kb * kBlockK, bk = std::min(kBlockK, p.kv_len - j0);
        Cover cv = cover(p, b, i0, i0 + bq, j0, j0 + bk);
        if (cv == Cover::none) continue;
        const O* kp = k.data() + (kv * p.kv_len + j0) * D;
        const O* vp = v.data() + (kv * p.kv_len + j0) * Dv;
        gemm({false, true, bq, bk, D, D, D, kBlockK}, p.scale, qp, kp, C(0), s.data());
        if (cv == Cover::partial) apply_mask(p, b, i0, bq, j0, bk, s.data(), kBlockK);
        for (int64_t r = 0; r < bq; ++r) {
          C corr = online_softmax_row(s.data() + r * kBlockK, bk, m[r], l[r],
                                      window_cols(p, cv, i0 + r, j0, bk));
          if (corr != C(1))
            for (int64_t c = 0; c < Dv; ++c) o[r * Dv + c] *= corr;
        }
        gemm({false, false, bq, Dv, bk, kBlockK, Dv, Dv}, C(1),
             as_operand<T>(s.data(), bq, bk, kBlockK, rounded.data()), vp, C(1), o.data());
      }
      for (int64_t r = 0; r < bq; ++r) {
        C inv = l[r] > 0 ? C(1) / l[r] : C(0);
        for (int64_t c = 0; c < Dv; ++c) o[r * Dv + c] *= inv;
        store_row(out, (row0 + r) * Dv, o.data() + r * Dv, Dv);
        lse[row0 + r] = m[r] + codegen::math::log(l[r]);
      }
    }
  });
}

template <class C, class O>
struct BackwardInputs {
  AsCompute<O> q, k, v, dout;
  const C *lse, *delta;
};

// The backward's shared step: P = exp(scale * Q K^T - lse) for one block
// pair into s (masked entries 0), then dS = P * (dO V^T - delta) into ds.
template <class C, class O>
void block_grads(const Problem<C>& p, const BackwardInputs<C, O>& in, int64_t b, int64_t h,
                 int64_t i0, int64_t bq, int64_t j0, int64_t bk, Cover cv, C* s, C* ds) {
  const int64_t D = p.head_dim, Dv = p.v_dim;
  int64_t row0 = (b * p.q_heads + h) * p.q_len + i0;
  int64_t kv = b * p.kv_heads + h / p.group();
  const O* qp = in.q.data() + row0 * D;
  const O* dop = in.dout.data() + row0 * Dv;
  gemm({false, true, bq, bk, D, D, D, kBlockK}, p.scale, qp,
       in.k.data() + (kv * p.kv_len + j0) * D, C(0), s);
  if (cv == Cover::partial) apply_mask(p, b, i0, bq, j0, bk, s, kBlockK);
  gemm({false, true, bq, bk, Dv, Dv, Dv, kBlockK}, C(1), dop,
       in.v.data() + (kv * p.kv_len + j0) * Dv, C(0), ds);
  for (int64_t r = 0; r < bq; ++r) {
    C lse = in.lse[row0 + r], delta = in.delta[row0 + r];
    C *sr = s + r * kBlockK, *dr = ds + r * kBlockK;
    // Outside the causal window P is exp(-inf) = 0, set without computing it.
    const auto [lo, hi] = whole_lanes(window_cols(p, cv, i0 + r, j0, bk), bk);
    std::fill(sr, sr + lo, C(0));
    for (int64_t c = lo; c < hi; ++c) sr[c] = codegen::math::exp(sr[c] - lse);  // 0 where masked
    std::fill(sr + hi, sr + bk, C(0));
    for (int64_t c = 0; c < bk; ++c) dr[c] = sr[c] * (dr[c] - delta);
  }
}

// A thread's dK and dV of one key block, summed over block pairs (query
// heads, then query blocks, in order), with its scratch.
template <class C, class T, class O>
struct KeyBlockGrads {
  const Problem<C>& p;
  const BackwardInputs<C, O>& in;
  ScoreBlocks<C> blocks;
  std::vector<C> dk = std::vector<C>(kBlockK * p.head_dim), dv = std::vector<C>(kBlockK * p.v_dim);
  std::vector<O> p_rounded = rounding_buffer<C, O>(), ds_rounded = rounding_buffer<C, O>();

  void clear() {
    std::fill(dk.begin(), dk.end(), C(0));
    std::fill(dv.begin(), dv.end(), C(0));
  }
  // Adds the pair of query block [i0, i0 + bq) of head h with the key block
  // at j0; returns dS as the products take it (rounded), valid until the next add.
  const O* add(int64_t b, int64_t h, int64_t i0, int64_t bq, int64_t j0, int64_t bk, Cover cv) {
    const int64_t D = p.head_dim, Dv = p.v_dim;
    block_grads(p, in, b, h, i0, bq, j0, bk, cv, blocks.p(), blocks.ds());
    int64_t row0 = (b * p.q_heads + h) * p.q_len + i0;
    gemm({true, false, bk, Dv, bq, kBlockK, Dv, Dv}, C(1),
         as_operand<T>(blocks.p(), bq, bk, kBlockK, p_rounded.data()), in.dout.data() + row0 * Dv,
         C(1), dv.data());
    const O* ds = as_operand<T>(blocks.ds(), bq, bk, kBlockK, ds_rounded.data());
    gemm({true, false, bk, D, bq, kBlockK, D, D}, p.scale, ds, in.q.data() + row0 * D, C(1),
         dk.data());
    return ds;
  }
  // Writes the block's bk rows of dK and dV (outputs 1 and 2), from key row key0.
  void store(const KernelArgs& a, int64_t key0, int64_t bk) const {
    for (int64_t r = 0; r < bk; ++r) {
      store_row(a.out[1], (key0 + r) * p.head_dim, dk.data() + r * p.head_dim, p.head_dim);
      store_row(a.out[2], (key0 + r) * p.v_dim, dv.data() + r * p.v_dim, p.v_dim);
    }
  }
};

// The backward in one pass: a task per (batch, kv head) walks its key
// blocks and, for each, the query blocks of its query heads, accumulating
// dK and dV of the key block and dQ of every query block at once, so P and
// dS are computed once per block pair. Every sum runs in the order the two
// passes below take, so either gives the same bits.
template <class C, class T, class O>
void backward_one_pass(const KernelArgs& a, const Problem<C>& p, const BackwardInputs<C, O>& in) {
  const int64_t D = p.head_dim, nq = p.q_blocks(), nk = p.k_blocks(), G = p.group();
  const int64_t task_work = G * p.q_len * p.kv_len * (2 * D + p.v_dim);  // multiply-adds
  parallel_for(p.batch * p.kv_heads, task_work, [&](int64_t begin, int64_t end) {
    KeyBlockGrads<C, T, O> key_block{p, in};
    std::vector<C> dq(G * p.q_len * D);  // the task's query heads, every row
    for (int64_t task = begin; task < end; ++task) {
      int64_t b = task / p.kv_heads, kvh = task % p.kv_heads;
      std::fill(dq.begin(), dq.end(), C(0));
      for (int64_t kb = 0; kb < nk; ++kb) {
        int64_t j0 = kb * kBlockK, bk = std::min(kBlockK, p.kv_len - j0);
        int64_t key0 = (b * p.kv_heads + kvh) * p.kv_len + j0;
        key_block.clear();
        for (int64_t h = kvh * G; h < (kvh + 1) * G; ++h) {
          for (int64_t qb = 0; qb < nq; ++qb) {
            int64_t i0 = qb * kBlockQ, bq = std::min(kBlockQ, p.q_len - i0);
            Cover cv = cover(p, b, i0, i0 + bq, j0, j0 + bk);
            if (cv == Cover::none) continue;
            const O* ds = key_block.add(b, h, i0, bq, j0, bk, cv);
            gemm({false, false, bq, D, bk, kBlockK, D, D}, p.scale, ds, in.k.data() + key0 * D,
                 C(1), dq.data() + ((h - kvh * G) * p.q_len + i0) * D);
          }
        }
        key_block.store(a, key0, bk);
      }
      const int64_t row0 = (b * p.q_heads + kvh * G) * p.q_len;  // the group's heads are adjacent
      for (int64_t r = 0; r < G * p.q_len; ++r)
        store_row(a.out[0], (row0 + r) * D, dq.data() + r * D, D);
    }
  });
}

// The backward in two passes, for more parallelism than (batch, kv head)
// pairs give: P and dS are computed in both.
template <class C, class T, class O>
void backward_two_passes(const KernelArgs& a, const Problem<C>& p, const BackwardInputs<C, O>& in) {
  const int64_t D = p.head_dim, Dv = p.v_dim, nq = p.q_blocks(), nk = p.k_blocks();
  const int64_t G = p.group();
  // Multiply-adds per task of the two passes.
  const int64_t k_task = G * kBlockK * p.q_len * (D + Dv), q_task = kBlockQ * p.kv_len * (D + Dv);

  // dK, dV: one task per (batch, kv head, key block).
  parallel_for(p.batch * p.kv_heads * nk, k_task, [&](int64_t begin, int64_t end) {
    KeyBlockGrads<C, T, O> key_block{p, in};
    for (int64_t task = begin; task < end; ++task) {
      int64_t b = task / (p.kv_heads * nk), kvh = task / nk % p.kv_heads, j0 = task % nk * kBlockK;
      int64_t bk = std::min(kBlockK, p.kv_len - j0);
      key_block.clear();
      for (int64_t h = kvh * G; h < (kvh + 1) * G; ++h) {
        for (int64_t qb = 0; qb < nq; ++qb) {
          int64_t i0 = qb * kBlockQ, bq = std::min(kBlockQ, p.q_len - i0);
          Cover cv = cover(p, b, i0, i0 + bq, j0, j0 + bk);
          if (cv != Cover::none) key_block.add(b, h, i0, bq, j0, bk, cv);
        }
      }
      key_block.store(a, (b * p.kv_heads + kvh) * p.kv_len + j0, bk);
    }
  });

  // dQ: one task per (batch, query head, query block).
  parallel_for(p.batch * p.q_heads * nq, q_task, [&](int64_t begin, int64_t end) {
    ScoreBlocks<C> blocks;
    std::vector<C> dq(kBlockQ * D);
    std::vector<O> ds_rounded = rounding_buffer<C, O>();
    for (int64_t task = begin; task < end; ++task) {
      int64_t b = task / (p.q_heads * nq), h = task / nq % p.q_heads, i0 = task % nq * kBlockQ;
      int64_t bq = std::min(kBlockQ, p.q_len - i0);
      int64_t kv = b * p.kv_heads + h / G;
      std::fill(dq.begin(), dq.end(), C(0));
      for (int64_t kb = 0; kb < nk; ++kb) {
        int64_t j0 = kb * kBlockK, bk = std::min(kBlockK, p.kv_len - j0);
        Cover cv = cover(p, b, i0, i0 + bq, j0, j0 + bk);
        if (cv == Cover::none) continue;
        block_grads(p, in, b, h, i0, bq, j0, bk, cv, blocks.p(), blocks.ds());
        gemm({false, false, bq, D, bk, kBlockK, D, D}, p.scale,
             as_operand<T>(blocks.ds(), bq, bk, kBlockK, ds_rounded.data()),
             in.k.data() + (kv * p.kv_len + j0) * D, C(1), dq.data());
      }
      int64_t row0 = (b * p.q_heads + h) * p.q_len + i0;
      for (int64_t r = 0; r < bq; ++r) store_row(a.out[0], (row0 + r) * D, dq.data() + r * D, D);
    }
  });
}

void forward_kernel(const KernelArgs& a) {
  by_operand_type(a.in[0].dtype, [&]<class C, class T, class O>() { forward<C, T, O>(a); });
}

template <class C, class T, class O>
void backward(const KernelArgs& a) {
  Problem<C> p = problem<C>(a, a.in.size() == 7 ? &a.in[6] : nullptr);
  BackwardInputs<C, O> in{AsCompute<O>(a.in[0]), AsCompute<O>(a.in[1]), AsCompute<O>(a.in[2]),
                          AsCompute<O>(a.in[3]), a.in[4].ptr<C>(), a.in[5].ptr<C>()};
  // One pass when its tasks are enough to share the threads evenly.
  if (p.batch * p.kv_heads >= 4 * int64_t(use_threads())) backward_one_pass<C, T, O>(a, p, in);
  else backward_two_passes<C, T, O>(a, p, in);
}

void backward_kernel(const KernelArgs& a) {
  by_operand_type(a.in[0].dtype, [&]<class C, class T, class O>() { backward<C, T, O>(a); });
}

const IsaKernelRegistrar registrations[] = {
    {DeviceKind::cpu, "flash_attention",
     {.fn = forward_kernel, .strided_inputs = false, .scratch_bytes = widened_inputs_bytes<0, 1, 2>}},
    {DeviceKind::cpu, "flash_attention_backward",
     {.fn = backward_kernel, .strided_inputs = false,
      .scratch_bytes = widened_inputs_bytes<0, 1, 2, 3>}},
};

}  // namespace
}  // namespace kiln::cpu
