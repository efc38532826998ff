// The strided copy's kernel (kiln/backend/cuda/strided_copy.h): elements
// move as unsigned words of their size, so a copy never converts.
#pragma once
#include "kiln/backend/cuda/kernels/common.cuh"
#include "kiln/backend/cuda/layout.cuh"

namespace kiln::cuda {

template <class W>
__global__ void strided_copy_k(W* dst, Layout d, const W* src, Layout s, long long n) {
  for (long long i = grid_start(); i < n; i += grid_step()) dst[offset_of(d, i)] = src[offset_of(s, i)];
}

}  // namespace kiln::cuda
