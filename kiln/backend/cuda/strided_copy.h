// Element-by-element copy between strided device buffers of one dtype and
// shape (src may broadcast with zero strides), on the current stream. The
// Backend's strided_copy and the copy and view kernels use it.
#pragma once
#include <cuda_runtime.h>

#include "kiln/runtime/kernel.h"

namespace kiln::cuda {

void strided_copy(const TensorRef& dst, const TensorRef& src);
// The same on `stream` (a transfer on the copy stream).
void strided_copy(const TensorRef& dst, const TensorRef& src, cudaStream_t stream);
// The same, dense buffers as one cudaMemcpyAsync (between device memory and
// pinned host memory, the copy engine's work, overlapping kernels).
void copy_on_stream(const TensorRef& dst, const TensorRef& src, cudaStream_t stream);

}  // namespace kiln::cuda
