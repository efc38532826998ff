// Fused kernels for silu_mul and silu_mul_backward, computing in f32 (f64
// for f64) and rounding once: the forward on the vectorised map engine, the
// backward in one pass for both outputs where the inputs are dense.
#include "kiln/backend/cpu/isa.h"
#include "kiln/backend/cpu/kernel_helpers.h"
#include "kiln/codegen/elementwise_ops.h"

namespace kiln::cpu {
namespace {

// The sigmoid op's own functor (inlined, so the loops vectorise).
constexpr codegen::Sigmoid sigmoid_of;

void silu_mul_kernel(const KernelArgs& a) {
  visit_floating(a.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    map<T, T, T>(a.out[0], [](auto g, auto u) { return g * sigmoid_of(g) * u; }, {&a.in[0], &a.in[1]});
  });
}

// d gate = dy u silu'(g) with silu'(g) = s (1 + g (1 - s)), d up = dy g s,
// for s = sigmoid(g).
constexpr auto d_gate = [](auto g, auto u, auto dy, auto s) { return dy * u * s * (1 + g * (1 - s)); };
constexpr auto d_up = [](auto g, auto dy, auto s) { return dy * g * s; };

void silu_mul_backward_kernel(const KernelArgs& a) {
  visit_floating(a.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    const bool dense = a.in[0].contiguous() && a.in[1].contiguous() && a.in[2].contiguous();
    if (!dense) {  // strided inputs: a pass of the map engine per output
      map<T, T, T, T>(a.out[0], [](auto g, auto u, auto dy) { return d_gate(g, u, dy, sigmoid_of(g)); },
                      {&a.in[0], &a.in[1], &a.in[2]});
      map<T, T, T>(a.out[1], [](auto g, auto dy) { return d_up(g, dy, sigmoid_of(g)); },
                   {&a.in[0], &a.in[2]});
      return;
    }
    // One pass for both outputs: each input read once, one sigmoid per
    // element (the kernel is compute bound on it). Same bits as two passes.
    parallel_for(a.out[0].numel(), 16, [&](int64_t begin, int64_t end) {
      // Pointers in locals: read through `a` in the loop, they would be
      // reloaded after each store (which could alias them).
      const T *g = a.in[0].ptr<T>(), *u = a.in[1].ptr<T>(), *dy = a.in[2].ptr<T>();
      T *dg = a.out[0].ptr<T>(), *du = a.out[1].ptr<T>();
      for (int64_t i = begin; i < end; ++i) {
        const auto gi = widen(g[i]), ui = widen(u[i]), dyi = widen(dy[i]);
        const auto s = sigmoid_of(gi);
        dg[i] = narrow<T>(d_gate(gi, ui, dyi, s));
        du[i] = narrow<T>(d_up(gi, dyi, s));
      }
    });
  });
}

const IsaKernelRegistrar registrations[] = {
    {DeviceKind::cpu, "silu_mul", {silu_mul_kernel, true}},
    {DeviceKind::cpu, "silu_mul_backward", {silu_mul_backward_kernel, true}},
};

}  // namespace
}  // namespace kiln::cpu
