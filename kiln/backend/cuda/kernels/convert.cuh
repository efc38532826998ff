// Contiguous device tensors to and from a compute-type buffer (as the CPU
// kernels' AsCompute and store_row): for kernels whose operands may have
// different floating dtypes.
#pragma once
#include "kiln/backend/cuda/kernels/common.cuh"

namespace kiln::cuda {

template <class C, class T>
__global__ void to_compute_k(const T* in, C* out, long long n) {
  for (long long i = grid_start(); i < n; i += grid_step()) out[i] = C(widen(in[i]));
}

template <class C, class T>
__global__ void from_compute_k(const C* in, T* out, long long n) {
  for (long long i = grid_start(); i < n; i += grid_step()) out[i] = narrow<T>(in[i]);
}

#if defined(__CUDACC__)  // the launches (the kernels also build for the host: emulated.h)
template <class C>
void to_compute(const TensorRef& t, C* out, const std::string& op) {
  visit_floating_storage(t.dtype, op, [&](auto tag) {
    using T = decltype(tag);
    launch_n(to_compute_k<C, T>, t.numel(), t.ptr<const T>(), out);
  });
}

template <class C>
void from_compute(const C* in, const TensorRef& t, const std::string& op) {
  visit_floating_storage(t.dtype, op, [&](auto tag) {
    using T = decltype(tag);
    launch_n(from_compute_k<C, T>, t.numel(), in, t.ptr<T>());
  });
}
#endif

}  // namespace kiln::cuda
