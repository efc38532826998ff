// The random ops on CUDA: the launches of random.cuh's kernels, each
// element a function of its Philox counter alone.
#include "kiln/backend/cuda/kernels/random.cuh"

namespace kiln::cuda {
namespace {

using namespace rng;

Stream stream_of(const KernelArgs& a) {
  return {(unsigned long long)a.attrs.i("seed"), (unsigned long long)a.attrs.i("offset")};
}

void uniform_kernel(const KernelArgs& a) {
  const TensorRef& out = a.out[0];
  visit_floating_storage(out.dtype, "random_uniform", [&](auto tag) {
    using T = decltype(tag);
    launch_n(uniform_k<T>, out.numel(), out.ptr<T>(), stream_of(a), a.attrs.f("low"),
             a.attrs.f("high"));
  });
}

void normal_kernel(const KernelArgs& a) {
  const TensorRef& out = a.out[0];
  visit_floating_storage(out.dtype, "random_normal", [&](auto tag) {
    using T = decltype(tag);
    launch_n(normal_k<T>, out.numel(), out.ptr<T>(), stream_of(a), a.attrs.f("mean"),
             a.attrs.f("std"));
  });
}

void bernoulli_kernel(const KernelArgs& a) {
  const TensorRef& out = a.out[0];
  visit_dtype(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    launch_n(bernoulli_k<T>, out.numel(), out.ptr<T>(), stream_of(a), a.attrs.f("p"));
  });
}

const KernelRegistrar registrations[] = {
    {DeviceKind::cuda, "random_uniform", {uniform_kernel, false}},
    {DeviceKind::cuda, "random_normal", {normal_kernel, false}},
    {DeviceKind::cuda, "bernoulli", {bernoulli_kernel, false}},
};

}  // namespace
}  // namespace kiln::cuda
