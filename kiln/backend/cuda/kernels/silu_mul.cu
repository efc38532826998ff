// silu_mul and silu_mul_backward on CUDA: the launches of silu_mul.cuh's kernels.
#include "kiln/backend/cuda/kernels/silu_mul.cuh"

namespace kiln::cuda {
namespace {

using namespace silu;

void silu_mul_kernel(const KernelArgs& a) {
  visit_floating_storage(a.in[0].dtype, "silu_mul", [&](auto tag) {
    using T = decltype(tag);
    launch_n(silu_mul_k<T>, a.out[0].numel(), a.in[0].ptr<const T>(), a.in[1].ptr<const T>(),
             a.out[0].ptr<T>());
  });
}

void silu_mul_backward_kernel(const KernelArgs& a) {
  visit_floating_storage(a.in[0].dtype, "silu_mul_backward", [&](auto tag) {
    using T = decltype(tag);
    launch_n(silu_mul_backward_k<T>, a.out[0].numel(), a.in[0].ptr<const T>(),
             a.in[1].ptr<const T>(), a.in[2].ptr<const T>(), a.out[0].ptr<T>(), a.out[1].ptr<T>());
  });
}

const KernelRegistrar registrations[] = {
    {DeviceKind::cuda, "silu_mul", {silu_mul_kernel, false}},
    {DeviceKind::cuda, "silu_mul_backward", {silu_mul_backward_kernel, false}},
};

}  // namespace
}  // namespace kiln::cuda
