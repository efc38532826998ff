#include "kiln/backend/cuda/scratch.h"

#include "kiln/backend/cuda/check.h"
#include "kiln/backend/cuda/stream.h"
#include "kiln/runtime/private_memory.h"

namespace kiln::cuda {

void* scratch(size_t bytes) {
  // While a program is recorded, its kernels' workspaces are its own.
  if (PrivateMemory* mine = private_memory(Device{DeviceKind::cuda, current_device()}))
    return mine->scratch(bytes);
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
