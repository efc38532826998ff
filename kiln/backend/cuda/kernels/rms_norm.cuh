// The kernels of rms_norm and rms_norm_backward (launched by rms_norm.cu),
// with the CPU kernels' arithmetic (kiln/backend/cpu/rms_norm.cc) in the
// same order, so they give the CPU's bits: one warp per row, whose sums fold
// as the CPU's lane_sum (16 lanes in order, then the tail); the weight
// gradient sums chunks of 32 rows and then the chunks in order. f32 compute
// (f64 for f64), one rounding.
#pragma once
#include "kiln/backend/cuda/kernels/common.cuh"
#include "kiln/codegen/elementwise_ops.h"

namespace kiln::cuda::rms {

constexpr int kRowsPerBlock = 8;  // warps per block, a row each
constexpr long long kChunk = 32;  // rows per partial weight gradient

// kernel_helpers.h's lane_sum: lane k of 16 sums f(k), f(k + 16), .. over
// the whole blocks of 16, the lanes add in order, then the tail. Every lane
// of the warp calls it and gets the sum.
template <class C, class F>
__device__ C lane_sum(long long n, F f) {
  const int lane = threadIdx.x % 32;
  const long long full = n - n % 16;
  C acc = 0;
  if (lane < 16)
    for (long long i = lane; i < full; i += 16) acc += f(i);
  C total = __shfl_sync(0xffffffffu, acc, 0);
  for (int k = 1; k < 16; ++k) total += __shfl_sync(0xffffffffu, acc, k);
  for (long long i = full; i < n; ++i) total += f(i);
  return total;
}

template <class T>
__device__ compute_t<T> inv_rms(const T* x, long long d, compute_t<T> eps) {
  using C = compute_t<T>;
  C ss = lane_sum<C>(d, [&](long long i) {
    const C v = widen(x[i]);
    return v * v;
  });
  return codegen::Rsqrt{}(ss / C(d) + eps);
}

// The calling warp's row, or -1 past the last (warp-uniform).
__device__ inline long long warp_row(long long rows) {
  const long long row = (long long)blockIdx.x * kRowsPerBlock + threadIdx.x / 32;
  return row < rows ? row : -1;
}

// Blocks of kRowsPerBlock warps that cover `rows` rows.
inline unsigned row_blocks(long long rows) { return unsigned((rows + kRowsPerBlock - 1) / kRowsPerBlock); }

template <class T>
__global__ void rms_norm_k(const T* x, const T* w, T* out, long long rows, long long d,
                           compute_t<T> eps) {
  const long long row = warp_row(rows);
  if (row < 0) return;
  const T* xr = x + row * d;
  const compute_t<T> inv = inv_rms(xr, d, eps);
  for (long long i = threadIdx.x % 32; i < d; i += 32)
    out[row * d + i] = narrow<T>(widen(xr[i]) * inv * widen(w[i]));
}

// dx, and each row's 1 / rms for the weight gradient.
template <class T>
__global__ void rms_norm_dx_k(const T* x, const T* w, const T* g, T* dx, compute_t<T>* inv_out,
                              long long rows, long long d, compute_t<T> eps) {
  using C = compute_t<T>;
  const long long row = warp_row(rows);
  if (row < 0) return;
  const T *xr = x + row * d, *gr = g + row * d;
  const C inv = inv_rms(xr, d, eps);
  const C dot = lane_sum<C>(d, [&](long long i) { return widen(gr[i]) * widen(w[i]) * widen(xr[i]); });
  const C k = inv * inv * inv * dot / C(d);
  for (long long i = threadIdx.x % 32; i < d; i += 32)
    dx[row * d + i] = narrow<T>(inv * (widen(gr[i]) * widen(w[i])) - widen(xr[i]) * k);
  if (threadIdx.x % 32 == 0) inv_out[row] = inv;
}

// partial[c * d + i]: the weight gradient of rows [32c, 32c + 32), in order.
template <class T>
__global__ void rms_norm_dw_partial_k(const T* x, const T* g, const compute_t<T>* inv,
                                      compute_t<T>* partial, long long rows, long long d,
                                      long long n) {
  using C = compute_t<T>;
  for (long long e = grid_start(); e < n; e += grid_step()) {
    const long long c = e / d, i = e % d;
    C acc = 0;
    for (long long r = c * kChunk; r < rows && r < (c + 1) * kChunk; ++r)
      acc += widen(g[r * d + i]) * widen(x[r * d + i]) * inv[r];
    partial[e] = acc;
  }
}

template <class T>
__global__ void rms_norm_dw_k(const compute_t<T>* partial, T* dw, long long chunks, long long d) {
  using C = compute_t<T>;
  for (long long i = grid_start(); i < d; i += grid_step()) {
    C acc = 0;
    for (long long c = 0; c < chunks; ++c) acc += partial[c * d + i];
    dw[i] = narrow<T>(acc);
  }
}

}  // namespace kiln::cuda::rms
