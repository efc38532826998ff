// Fills a contiguous device tensor with one value converted to its dtype
// (as the CPU's pad and full kernels convert it: through the compute type).
#pragma once
#include "kiln/backend/cuda/kernels/common.cuh"

namespace kiln::cuda {

template <class T, class C>
__global__ void fill_kernel(T* out, C value, long long n) {
  const T v = narrow<T>(value);
  for (long long i = grid_start(); i < n; i += grid_step()) out[i] = v;
}

#if defined(__CUDACC__)  // the launches (the kernels also build for the host: emulated.h)
inline void fill(const TensorRef& out, double value) {
  visit_dtype(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    launch_n(fill_kernel<T, C>, out.numel(), out.ptr<T>(), static_cast<C>(value));
  });
}
#endif

}  // namespace kiln::cuda
