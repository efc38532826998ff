// The kernel of find_non_finite (non_finite.h, launched by non_finite.cu):
// the first NaN and the first infinity of a strided tensor.
#pragma once
#include "kiln/backend/cuda/layout.cuh"

namespace kiln::cuda::non_finite {

// Elements are read as words of their size and classified by their bits:
// all exponent bits set is an infinity (mantissa zero) or a NaN.
template <class W, W kExponent, W kMantissa>
__global__ void find_kernel(const W* data, Layout l, long long n, unsigned long long* first) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    const W w = data[offset_of(l, i)];
    if ((w & kExponent) != kExponent) continue;
    // The minimum is the same whatever order the threads arrive in.
    atomicMin(&first[(w & kMantissa) ? 0 : 1], (unsigned long long)i);
  }
}

}  // namespace kiln::cuda::non_finite
