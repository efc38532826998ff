// Fused kernels for rope and rope_backward with the CPU kernels' arithmetic
// (kiln/backend/cpu/rope.cc), so they give the CPU's bits: f32 compute (f64
// for f64), one rounding. cos and sin (any floating dtype) are read in the
// compute type; each table gradient element is one thread's sum over the
// batch and heads, in the CPU's order.
#include "kiln/backend/cuda/kernels/convert.cuh"
#include "kiln/backend/cuda/scratch.h"

namespace kiln::cuda {
namespace {

// x [B, S, H, D]; cos and sin [S, D] or [B, S, D].
struct RopeDims {
  long long batch, seq, heads, dim, half;
  bool per_batch;
  __device__ long long table_row(long long row) const {  // of x's row [b, s, h]
    const long long s = row / heads % seq;
    return per_batch ? row / (seq * heads) * seq + s : s;
  }
};
RopeDims dims_of(const KernelArgs& a) {
  const Shape& x = a.in[0].shape;
  return {x[0], x[1], x[2], x[3], x[3] / 2, a.in[1].rank() == 3};
}
long long table_rows(const RopeDims& r) { return r.per_batch ? r.batch * r.seq : r.seq; }

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

// The cos and sin tables (inputs 1 and 2) in the compute type, at the front
// of `tables` table-sized arrays of scratch (the rest are the caller's).
template <class C>
C* tables_in_scratch(const KernelArgs& a, int tables) {
  const long long table = a.in[1].numel();
  C* cos = static_cast<C*>(scratch(size_t(tables * table + 1) * sizeof(C)));
  to_compute(a.in[1], cos, a.op.name);
  to_compute(a.in[2], cos + table, a.op.name);
  return cos;
}

void rope_kernel(const KernelArgs& a) {
  visit_floating_storage(a.in[0].dtype, "rope", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const RopeDims r = dims_of(a);
    C* cos = tables_in_scratch<C>(a, 2);
    C* sin = cos + a.in[1].numel();
    launch_n(rope_k<T, C>, a.in[0].numel(), a.in[0].ptr<const T>(), cos, sin, a.out[0].ptr<T>(), r);
  });
}

void rope_backward_kernel(const KernelArgs& a) {
  visit_floating_storage(a.in[0].dtype, "rope_backward", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const RopeDims r = dims_of(a);
    const long long table = a.in[1].numel();
    C* cos = tables_in_scratch<C>(a, 4);
    C *sin = cos + table, *dcos = sin + table, *dsin = dcos + table;
    const T *x = a.in[0].ptr<const T>(), *g = a.in[3].ptr<const T>();
    launch_n(rope_dx_k<T, C>, a.in[0].numel(), g, cos, sin, a.out[0].ptr<T>(), r);
    launch_n(rope_dtable_k<T, C>, table_rows(r) * r.dim, x, g, dcos, dsin, r);
    from_compute(dcos, a.out[1], "rope_backward");
    from_compute(dsin, a.out[2], "rope_backward");
  });
}

const KernelRegistrar registrations[] = {
    {DeviceKind::cuda, "rope", {rope_kernel, false}},
    {DeviceKind::cuda, "rope_backward", {rope_backward_kernel, false}},
};

}  // namespace
}  // namespace kiln::cuda
