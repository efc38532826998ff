#include "kiln/backend/cuda/scratch.h"

#include "kiln/backend/cuda/check.h"
#include "kiln/backend/cuda/stream.h"

namespace kiln::cuda {

void* scratch(size_t bytes) {
  thread_local void* buffer = nullptr;
  thread_local size_t capacity = 0;
  if (bytes <= capacity) return buffer;
  cudaStream_t s = current_stream();
  if (buffer) KILN_CUDA_CHECK(cudaFreeAsync(buffer, s));
  buffer = nullptr;
  capacity = 0;
  size_t grown = bytes + bytes / 2;
  KILN_CUDA_CHECK(cudaMallocAsync(&buffer, grown, s));
  capacity = grown;
  return buffer;
}

}  // namespace kiln::cuda
