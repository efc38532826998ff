// The kernels of rope and rope_backward (launched by rope.cu) with the CPU
// kernels' arithmetic (kiln/backend/cpu/rope.cc), so they give the CPU's
// bits: f32 compute (f64 for f64), one rounding, cos and sin read in the
// compute type; each table gradient element is one thread's sum over the
// batch and heads, in the CPU's order.
#pragma once
#include "kiln/backend/cuda/kernels/common.cuh"

namespace kiln::cuda::rope {

// x [B, S, H, D]; cos and sin [S, D] or [B, S, D].
struct RopeDims {
  long long batch, seq, heads, dim, half;
  bool per_batch;
  __device__ long long table_row(long long row) const {  // of x's row [b, s, h]
    const long long s = row / heads % seq;
    return per_batch ? row / (seq * heads) * seq + s : s;
  }
  long long table_rows() const { return per_batch ? batch * seq : seq; }
};

template <class T, class C>
__global__ void rope_k(const T* x, const C* cos, const C* sin, T* out, RopeDims r, long long n) {
  for (long long e = grid_start(); e < n; e += grid_step()) {
    const long long i = e % r.dim, t = r.table_row(e / r.dim) * r.dim + i;
    const C v = widen(x[e]);
    out[e] = narrow<T>(i < r.half ? v * cos[t] + -C(widen(x[e + r.half])) * sin[t]
                                  : v * cos[t] + C(widen(x[e - r.half])) * sin[t]);
  }
}

template <class T, class C>
__global__ void rope_dx_k(const T* g, const C* cos, const C* sin, T* dx, RopeDims r, long long n) {
  for (long long e = grid_start(); e < n; e += grid_step()) {
    const long long i = e % r.dim, t = r.table_row(e / r.dim) * r.dim;
    const C gi = widen(g[e]);
    dx[e] = narrow<T>(i < r.half ? gi * cos[t + i] + C(widen(g[e + r.half])) * sin[t + i + r.half]
                                 : gi * cos[t + i] - C(widen(g[e - r.half])) * sin[t + i - r.half]);
  }
}

// dcos[t, i] and dsin[t, i], summed over the x rows that read table row t.
template <class T, class C>
__global__ void rope_dtable_k(const T* x, const T* g, C* dcos, C* dsin, RopeDims r, long long n) {
  for (long long e = grid_start(); e < n; e += grid_step()) {
    const long long t = e / r.dim, i = e % r.dim;
    const long long b0 = r.per_batch ? t / r.seq : 0, b1 = r.per_batch ? b0 + 1 : r.batch;
    const long long pos = r.per_batch ? t % r.seq : t;
    C dc = 0, ds = 0;
    for (long long b = b0; b < b1; ++b)
      for (long long h = 0; h < r.heads; ++h) {
        const long long at = ((b * r.seq + pos) * r.heads + h) * r.dim + i;
        const C gi = widen(g[at]);
        dc += gi * C(widen(x[at]));
        ds += i < r.half ? gi * -C(widen(x[at + r.half])) : gi * C(widen(x[at - r.half]));
      }
    dcos[e] = dc;
    dsin[e] = ds;
  }
}

}  // namespace kiln::cuda::rope
