// Fused kernels for silu_mul and silu_mul_backward, on the vectorised map
// engine: one pass per output, computing in f32 (f64 for f64) and rounding
// once.
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

const IsaKernelRegistrar registrations[] = {
    {DeviceKind::cpu, "silu_mul", {silu_mul_kernel, true}},
    {DeviceKind::cpu, "silu_mul_backward", {silu_mul_backward_kernel, true}},
};

}  // namespace
}  // namespace kiln::cpu
