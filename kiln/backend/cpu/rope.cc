// Fused kernels for rope and rope_backward: one pass over the data each,
// computing in f32 (f64 for f64) and rounding once. The backward gives each
// table row to one thread, so the table gradients do not depend on the
// thread count.
#include <algorithm>
#include <vector>

#include "kiln/backend/cpu/isa.h"
#include "kiln/backend/cpu/kernel_helpers.h"

namespace kiln::cpu {
namespace {

// x [B, S, H, D]; cos and sin [S, D] or [B, S, D].
struct RopeDims {
  int64_t batch, seq, heads, dim, half;
  bool per_batch;
  explicit RopeDims(const KernelArgs& a)
      : batch(a.in[0].shape[0]), seq(a.in[0].shape[1]), heads(a.in[0].shape[2]),
        dim(a.in[0].shape[3]), half(dim / 2), per_batch(a.in[1].rank() == 3) {}
  int64_t table_row(int64_t b, int64_t s) const { return per_batch ? b * seq + s : s; }
};

void rope_kernel(const KernelArgs& a) {
  visit_floating(a.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    RopeDims r(a);
    AsCompute<C> cos(a.in[1]), sin(a.in[2]);
    parallel_for(r.batch * r.seq * r.heads, r.dim, [&](int64_t b, int64_t e) {
      std::vector<C> x(static_cast<size_t>(r.dim)), y(static_cast<size_t>(r.dim));
      for (int64_t row = b; row < e; ++row) {
        int64_t t = r.table_row(row / (r.seq * r.heads), row / r.heads % r.seq);
        const C *c = cos.data() + t * r.dim, *s = sin.data() + t * r.dim;
        load_as<T>(a.in[0], row * r.dim, r.dim, x.data());
        for (int64_t i = 0; i < r.half; ++i) y[i] = x[i] * c[i] + -x[i + r.half] * s[i];
        for (int64_t i = r.half; i < r.dim; ++i) y[i] = x[i] * c[i] + x[i - r.half] * s[i];
        store_as<T>(a.out[0], row * r.dim, y.data(), r.dim);
      }
    });
  });
}

void rope_backward_kernel(const KernelArgs& a) {
  visit_floating(a.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    RopeDims r(a);
    AsCompute<C> cos(a.in[1]), sin(a.in[2]);
    // One task per table row: it owns that row's dcos and dsin and the dx
    // rows that read it.
    int64_t table_rows = r.per_batch ? r.batch * r.seq : r.seq;
    int64_t per_table_row = (r.per_batch ? 1 : r.batch) * r.heads * r.dim;
    parallel_for(table_rows, per_table_row, [&](int64_t b, int64_t e) {
      std::vector<C> x(static_cast<size_t>(r.dim)), g(static_cast<size_t>(r.dim)), dx(static_cast<size_t>(r.dim));
      std::vector<C> dc(static_cast<size_t>(r.dim)), ds(static_cast<size_t>(r.dim));
      for (int64_t t = b; t < e; ++t) {
        const C *c = cos.data() + t * r.dim, *s = sin.data() + t * r.dim;
        std::fill(dc.begin(), dc.end(), C(0));
        std::fill(ds.begin(), ds.end(), C(0));
        int64_t b0 = r.per_batch ? t / r.seq : 0, b1 = r.per_batch ? b0 + 1 : r.batch;
        int64_t pos = r.per_batch ? t % r.seq : t;
        for (int64_t bi = b0; bi < b1; ++bi) {
          for (int64_t h = 0; h < r.heads; ++h) {
            int64_t row = (bi * r.seq + pos) * r.heads + h;
            load_as<T>(a.in[0], row * r.dim, r.dim, x.data());
            load_as<T>(a.in[3], row * r.dim, r.dim, g.data());
            // Iteration i touches elements i and i + half only: independent,
            // which GCC cannot prove for five buffers and so left scalar.
#pragma omp simd
            for (int64_t i = 0; i < r.half; ++i) {
              int64_t j = i + r.half;
              dx[i] = g[i] * c[i] + g[j] * s[j];
              dx[j] = g[j] * c[j] - g[i] * s[i];
              dc[i] += g[i] * x[i];
              dc[j] += g[j] * x[j];
              ds[i] += g[i] * -x[j];
              ds[j] += g[j] * x[i];
            }
            store_as<T>(a.out[0], row * r.dim, dx.data(), r.dim);
          }
        }
        store_row(a.out[1], t * r.dim, dc.data(), r.dim);
        store_row(a.out[2], t * r.dim, ds.data(), r.dim);
      }
    });
  });
}

const IsaKernelRegistrar registrations[] = {
    {DeviceKind::cpu, "rope", {rope_kernel, false}},
    {DeviceKind::cpu, "rope_backward", {rope_backward_kernel, false}},
};

}  // namespace
}  // namespace kiln::cpu
