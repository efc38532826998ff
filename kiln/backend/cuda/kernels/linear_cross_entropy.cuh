// The fused linear cross-entropy's row kernels on CUDA (launched, between
// its cuBLASLt products, by linear_cross_entropy.cu): the online fold of a
// vocabulary tile's logits into each row's max and sum, the rows' losses,
// their fixed-order reduction and the gradient tile.
#pragma once
#include <cmath>

#include "kiln/backend/cuda/kernels/common.cuh"
#include "kiln/backend/cuda/kernels/index_fault.h"
#include "kiln/codegen/math.h"

namespace kiln::cuda::lce {

namespace math = codegen::math;

constexpr int kRowsPerBlock = 8;  // warps per block, a row each

// Targets (i32 or i64) and where a bad one is reported.
struct Targets {
  const void* data;
  bool wide;
  long long ignore, vocab;
  IndexFault* fault;
  __device__ long long operator[](long long r) const {
    return wide ? static_cast<const long long*>(data)[r] : static_cast<const int*>(data)[r];
  }
  // The row's target, or -1 when it is ignored or out of range (reported).
  __device__ long long class_of(long long r) const {
    const long long t = (*this)[r];
    if (t == ignore) return -1;
    if (t >= 0 && t < vocab) return t;
    if (atomicCAS(&fault->set, 0u, 1u) == 0u) {
      fault->op = int(IndexOp::linear_cross_entropy);
      fault->axis = -1;
      fault->value = t;
      fault->position = r;
      fault->size = vocab;
    }
    return -1;
  }
};

// The calling warp's row, or -1 past the last (warp-uniform).
inline __device__ long long warp_row(long long rows) {
  const long long row = (long long)blockIdx.x * kRowsPerBlock + threadIdx.x / 32;
  return row < rows ? row : -1;
}

template <class C>
__device__ C warp_max(C x) {
  for (int off = 16; off > 0; off /= 2) {
    const C y = __shfl_xor_sync(0xffffffffu, x, off);
    x = x < y ? y : x;
  }
  return x;
}
template <class C>
__device__ C warp_sum(C x) {
  for (int off = 16; off > 0; off /= 2) x += __shfl_xor_sync(0xffffffffu, x, off);
  return x;
}

template <class C>
__global__ void start_rows_k(C* m, C* l, C* picked, long long rows) {
  for (long long r = grid_start(); r < rows; r += grid_step()) {
    m[r] = -C(INFINITY);
    l[r] = 0;
    picked[r] = 0;
  }
}

// Folds logits[rows, width] (vocabulary columns v0..) into each row's
// running max m and sum l, and picks the target's logit.
template <class C>
__global__ void fold_tile_k(const C* logits, long long width, long long v0, Targets targets, C* m,
                            C* l, C* picked, long long rows) {
  const long long r = warp_row(rows);
  if (r < 0) return;
  const int lane = threadIdx.x % 32;
  const C* z = logits + r * width;
  C mx = -C(INFINITY);
  for (long long c = lane; c < width; c += 32) mx = mx < z[c] ? z[c] : mx;
  mx = warp_max(mx);
  const C mn = m[r] < mx ? mx : m[r];
  C s = 0;
  for (long long c = lane; c < width; c += 32) s += math::exp(z[c] - mn);
  s = warp_sum(s);
  if (lane != 0) return;
  l[r] = l[r] * math::exp(m[r] - mn) + s;
  m[r] = mn;
  const long long t = targets.class_of(r);
  if (t >= v0 && t < v0 + width) picked[r] = z[t - v0];
}

// Each row's log-sum-exp and loss (0 where the target is ignored).
template <class C>
__global__ void finish_rows_k(const C* m, const C* l, const C* picked, Targets targets, C* lse,
                              C* row_loss, long long rows) {
  for (long long r = grid_start(); r < rows; r += grid_step()) {
    lse[r] = m[r] + math::log(l[r]);
    row_loss[r] = targets.class_of(r) >= 0 ? lse[r] - picked[r] : C(0);
  }
}

// loss[0] = the sum (or the mean over rows with a target) of the row
// losses, summed in f64 in one fixed order by one warp.
template <class C>
__global__ void reduce_k(const C* row_loss, Targets targets, bool mean, C* loss, long long rows) {
  const int lane = threadIdx.x;
  double total = 0, count = 0;
  for (long long r = lane; r < rows; r += 32) {
    total += double(row_loss[r]);
    count += targets.class_of(r) >= 0 ? 1 : 0;
  }
  for (int k = 0; k < 32; ++k) {  // lanes in order
    const double t = __shfl_sync(0xffffffffu, total, k), n = __shfl_sync(0xffffffffu, count, k);
    if (lane == 0 && k > 0) total += t, count += n;
  }
  if (lane == 0) loss[0] = C(mean ? total / count : total);  // NaN without targets, as torch
}

// g[r, c] = exp(z - lse[r]) * dsoft[r] - (c is r's target) * dtarget[r],
// rounded to the products' dtype T.
template <class T, class C>
__global__ void grad_tile_k(const C* logits, T* g, long long width, long long v0, Targets targets,
                            const C* lse, const C* dsoft, const C* dtarget, long long n) {
  for (long long e = grid_start(); e < n; e += grid_step()) {
    const long long r = e / width, c = e % width;
    C v = math::exp(logits[e] - lse[r]) * dsoft[r];
    if (targets.class_of(r) == v0 + c) v -= dtarget[r];
    g[e] = narrow<T>(v);
  }
}

template <class T, class C>
__global__ void narrow_k(const C* x, T* out, long long n) {
  for (long long e = grid_start(); e < n; e += grid_step()) out[e] = narrow<T>(x[e]);
}

}  // namespace kiln::cuda::lce
