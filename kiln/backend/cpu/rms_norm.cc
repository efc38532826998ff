// Fused kernels for rms_norm and rms_norm_backward: one pass over the data
// each, computing in f32 (f64 for f64) and rounding once. Row sums use
// lane_sum's fixed order and the weight gradient sums fixed chunks of rows
// and then the chunks in order, so no result depends on the thread count.
#include <cmath>
#include <vector>

#include "kiln/backend/cpu/isa.h"
#include "kiln/backend/cpu/kernel_helpers.h"

namespace kiln::cpu {
namespace {

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
    parallel_for(rows, d, [&](int64_t b, int64_t e) {
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
    parallel_for(chunks, kChunk * d, [&](int64_t b, int64_t e) {
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

const IsaKernelRegistrar registrations[] = {
    {DeviceKind::cpu, "rms_norm", {rms_norm_kernel, false}},
    {DeviceKind::cpu, "rms_norm_backward", {rms_norm_backward_kernel, false}},
};

}  // namespace
}  // namespace kiln::cpu
