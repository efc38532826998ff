// Fused kernels for rms_norm, rope and silu_mul and their backward ops: one
// pass over the data each, computing in f32 (f64 for f64) and rounding once.
// Row sums use lane_sum's fixed order; rms_norm's weight gradient sums
// fixed chunks of rows and then the chunks in order, and rope's table
// gradients give each table row to one thread, so no result depends on the
// thread count.
#include <cmath>
#include <vector>

#include "kiln/backend/cpu/kernel_helpers.h"
#include "kiln/backend/cpu/vmath.h"

namespace kiln::cpu {
namespace {

// Calls f(tag) for the floating storage types.
template <class F>
void visit_floating(DType t, F&& f) {
  visit_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, bf16> || std::is_same_v<T, f16>)
      f(tag);
  });
}

// ------------------------------------------------------------------ rms_norm

template <class C>
C inv_rms(const C* x, int64_t d, C eps) {
  C ss = lane_sum<C>(d, [&](int64_t i) { return x[i] * x[i]; });
  return C(1) / std::sqrt(ss / C(d) + eps);
}

void rms_norm_kernel(const KernelArgs& a) {
  visit_floating(a.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const int64_t d = a.in[1].shape[0], rows = d ? a.in[0].numel() / d : 0;
    const C eps = C(a.attrs.f("eps"));
    std::vector<C> w(static_cast<size_t>(d));
    load_as<T>(a.in[1], 0, d, w.data());
    parallel_for(rows, std::max<int64_t>(1, 8192 / std::max<int64_t>(d, 1)), [&](int64_t b, int64_t e) {
      std::vector<C> x(static_cast<size_t>(d));
      for (int64_t r = b; r < e; ++r) {
        load_as<T>(a.in[0], r * d, d, x.data());
        C inv = inv_rms(x.data(), d, eps);
        for (int64_t i = 0; i < d; ++i) x[i] = x[i] * inv * w[i];
        store_as<T>(a.out[0], r * d, x.data(), d);
      }
    });
  });
}

void rms_norm_backward_kernel(const KernelArgs& a) {
  constexpr int64_t kChunk = 32;  // rows per partial weight gradient
  visit_floating(a.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const int64_t d = a.in[1].shape[0], rows = d ? a.in[0].numel() / d : 0;
    const int64_t chunks = (rows + kChunk - 1) / kChunk;
    const C eps = C(a.attrs.f("eps"));
    std::vector<C> w(static_cast<size_t>(d)), partial(static_cast<size_t>(chunks * d), C(0));
    load_as<T>(a.in[1], 0, d, w.data());
    parallel_for(chunks, 1, [&](int64_t b, int64_t e) {
      std::vector<C> x(static_cast<size_t>(d)), g(static_cast<size_t>(d));
      for (int64_t c = b; c < e; ++c) {
        C* acc = partial.data() + c * d;
        for (int64_t r = c * kChunk; r < std::min(rows, (c + 1) * kChunk); ++r) {
          load_as<T>(a.in[0], r * d, d, x.data());
          load_as<T>(a.in[2], r * d, d, g.data());
          C inv = inv_rms(x.data(), d, eps);
          C dot = lane_sum<C>(d, [&](int64_t i) { return g[i] * w[i] * x[i]; });
          C k = inv * inv * inv * dot / C(d);
          for (int64_t i = 0; i < d; ++i) {
            acc[i] += g[i] * x[i] * inv;
            g[i] = inv * (g[i] * w[i]) - x[i] * k;
          }
          store_as<T>(a.out[0], r * d, g.data(), d);
        }
      }
    });
    std::vector<C> dw(static_cast<size_t>(d), C(0));
    for (int64_t c = 0; c < chunks; ++c)
      for (int64_t i = 0; i < d; ++i) dw[i] += partial[c * d + i];
    store_as<T>(a.out[1], 0, dw.data(), d);
  });
}

// ---------------------------------------------------------------------- rope

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
    parallel_for(r.batch * r.seq * r.heads, std::max<int64_t>(1, 8192 / r.dim), [&](int64_t b, int64_t e) {
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
    parallel_for(table_rows, 1, [&](int64_t b, int64_t e) {
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

// ------------------------------------------------------------------ silu_mul

template <class C>
C sigmoid_of(C x) {
  return C(1) / (C(1) + fast_exp(-x));
}

void silu_mul_kernel(const KernelArgs& a) {
  visit_floating(a.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    map<T, T, T>(a.out[0], [](auto g, auto u) { return g * sigmoid_of(g) * u; }, {&a.in[0], &a.in[1]});
  });
}

void silu_mul_backward_kernel(const KernelArgs& a) {
  // Two passes of the vectorised map engine, one per output.
  visit_floating(a.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    map<T, T, T, T>(
        a.out[0],
        [](auto g, auto u, auto dy) {
          auto s = sigmoid_of(g);
          return dy * u * s * (1 + g * (1 - s));
        },
        {&a.in[0], &a.in[1], &a.in[2]});
    map<T, T, T>(a.out[1], [](auto g, auto dy) { return dy * g * sigmoid_of(g); },
                 {&a.in[0], &a.in[2]});
  });
}

const KernelRegistrar registrations[] = {
    {DeviceKind::cpu, "rms_norm", {rms_norm_kernel, false}},
    {DeviceKind::cpu, "rms_norm_backward", {rms_norm_backward_kernel, false}},
    {DeviceKind::cpu, "rope", {rope_kernel, false}},
    {DeviceKind::cpu, "rope_backward", {rope_backward_kernel, false}},
    {DeviceKind::cpu, "silu_mul", {silu_mul_kernel, true}},
    {DeviceKind::cpu, "silu_mul_backward", {silu_mul_backward_kernel, true}},
};

}  // namespace
}  // namespace kiln::cpu
