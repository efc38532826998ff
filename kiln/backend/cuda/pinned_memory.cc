#include "kiln/backend/cuda/pinned_memory.h"

#include <cuda_runtime.h>

#include "kiln/backend/cuda/check.h"
#include "kiln/backend/cuda/devices.h"
#include "kiln/base/error.h"

namespace kiln::cuda {

void* PinnedMemory::allocate(size_t bytes) {
  DeviceGuard on(device_);
  void* p = nullptr;
  cudaError_t err = cudaHostAlloc(&p, bytes, cudaHostAllocPortable | cudaHostAllocMapped);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // not sticky: clear it, the caller retries or reports
    return nullptr;
  }
  KILN_CUDA_CHECK(err);
  return p;
}

void PinnedMemory::release(void* p, size_t) {
  DeviceGuard on(device_);
  KILN_CUDA_CHECK(cudaFreeHost(p));
}

std::string PinnedMemory::out_of_memory(size_t bytes, const MemoryStats& stats) {
  return cat("cuda:", device_, ": out of pinned host memory for activation offload, allocating ",
             bytes, " bytes (the offload pool holds ", stats.reserved,
             " bytes, all of them in live activations); offload fewer activations "
             "(activation_checkpoint.mode selective or full) or free host memory");
}

}  // namespace kiln::cuda
