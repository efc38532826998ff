// The kernels of argmax, logsumexp, var, softmax and log_softmax
// (launched by reduction.cu): one block per result row, folding in the
// CPU's canonical order (row_fold.cuh), with the CPU kernels' arithmetic
// (kiln/backend/cpu/reduction.cc): floats compute in f32 (f64 for f64),
// integers in their own type. Sums and maxima are the CPU's bits; exp and
// log are CUDA's (expf within 2 ulp, the CPU's own f32 exp within 1), so
// logsumexp and the softmaxes differ from the CPU's in the last bits.
#pragma once
#include <vector>

#include "kiln/backend/cuda/kernels/row_fold.cuh"
#include "kiln/backend/cuda/layout.cuh"
#include "kiln/codegen/math.h"

namespace kiln::cuda::rowwise {

namespace math = codegen::math;

// The input split into the kept axes (one row per position, row-major, as
// the contiguous output) and the reduced ones (a row's elements, row-major).
struct RowPlan {
  Layout kept, reduced;
  long long rows, length;
  __device__ long long offset(long long row, long long r) const {
    return offset_of(kept, row) + offset_of(reduced, r);
  }
};

// The plan of a tensor laid out as (shape, strides); `reduced` marks the reduced axes.
inline RowPlan plan_of(const Shape& shape, const Strides& strides, const std::vector<bool>& reduced) {
  Shape ks, rs;
  Strides kst, rst;
  for (int d = 0; d < shape.size(); ++d) {
    (reduced[d] ? rs : ks).push_back(shape[d]);
    (reduced[d] ? rst : kst).push_back(strides[d]);
  }
  return {layout_of(ks, kst), layout_of(rs, rst), ks.numel(), rs.numel()};
}

template <class T> using MaxOp = ExtremumOp<T, true>;

// A row's elements in the compute type.
template <class T>
struct RowLoad {
  const T* x;
  const RowPlan& p;
  long long row;
  __device__ compute_t<T> operator()(long long r) const { return widen(x[p.offset(row, r)]); }
};

// The row maximum made safe to subtract: a non-finite one becomes 0, so a
// row of -inf gives exp(-inf) = 0 and an inf or NaN propagates.
template <class T>
__device__ compute_t<T> stable_shift(const RowLoad<T>& at, MaxOp<T> mx) {
  const compute_t<T> m = block_fold(mx, at.p.length, at);
  return isfinite(m) ? m : compute_t<T>(0);
}

// Sum of exp(x - shift) over the row.
template <class T>
__device__ compute_t<T> exp_sum(const RowLoad<T>& at, compute_t<T> shift) {
  using C = compute_t<T>;
  return block_fold(SumOp<T, C>{}, at.p.length, [&](long long r) { return math::exp(at(r) - shift); });
}

template <class T>
__global__ void logsumexp_k(const T* x, RowPlan p, MaxOp<T> mx, T* out) {
  for (long long row = blockIdx.x; row < p.rows; row += gridDim.x) {
    RowLoad<T> at{x, p, row};
    const compute_t<T> shift = stable_shift(at, mx);
    const compute_t<T> s = exp_sum(at, shift);
    if (threadIdx.x == 0) out[row] = narrow<T>(shift + math::log(s));
  }
}

// Two passes (mean, then squared deviations) for accuracy, as the CPU.
template <class T>
__global__ void var_k(const T* x, RowPlan p, long long correction, T* out) {
  using C = compute_t<T>;
  for (long long row = blockIdx.x; row < p.rows; row += gridDim.x) {
    RowLoad<T> at{x, p, row};
    const C n = C(p.length);
    const C mean = block_fold(SumOp<T, C>{}, p.length, at) / n;
    const C dev = block_fold(SumOp<T, C>{}, p.length, [&](long long r) {
      const C d = at(r) - mean;
      return d * d;
    });
    // As torch.var: a non-positive denominator gives inf or NaN.
    const C denom = C(0) < n - C(correction) ? n - C(correction) : C(0);
    if (threadIdx.x == 0) out[row] = narrow<T>(dev / denom);
  }
}

// softmax = exp(x - m) / sum, log_softmax = (x - m) - log(sum).
template <class T, bool kLog>
__global__ void softmax_k(const T* x, RowPlan p, RowPlan q, MaxOp<T> mx, T* out) {
  using C = compute_t<T>;
  for (long long row = blockIdx.x; row < p.rows; row += gridDim.x) {
    RowLoad<T> at{x, p, row};
    const C shift = stable_shift(at, mx);
    const C s = exp_sum(at, shift);
    const C t = kLog ? math::log(s) : s;
    for (long long r = threadIdx.x; r < p.length; r += blockDim.x) {
      const C v = at(r) - shift;
      out[q.offset(row, r)] = narrow<T>(kLog ? v - t : math::exp(v) / t);
    }
  }
}

// The first maximum (a NaN counts as the maximum, the first NaN wins): the
// maximum, then the least position holding it.
template <class T>
__global__ void argmax_k(const T* x, RowPlan p, MaxOp<T> mx, int64_t* out) {
  using C = compute_t<T>;
  const ExtremumOp<int64_t, false> first;
  for (long long row = blockIdx.x; row < p.rows; row += gridDim.x) {
    RowLoad<T> at{x, p, row};
    const C best = block_fold(mx, p.length, at);
    const bool nan = best != best;
    const int64_t r = block_fold(first, p.length, [&](long long i) {
      const C v = at(i);
      return v == best || (nan && v != v) ? int64_t(i) : first.identity;
    });
    if (threadIdx.x == 0) out[row] = r < p.length ? r : 0;  // an empty row gives 0, as on the CPU
  }
}

}  // namespace kiln::cuda::rowwise
