#include "kiln/backend/cuda/device_memory.h"

#include <cuda_runtime.h>

#include "kiln/backend/cuda/check.h"
#include "kiln/backend/cuda/cuda_graph.h"
#include "kiln/backend/cuda/devices.h"
#include "kiln/backend/cuda/out_of_memory.h"

namespace kiln::cuda {

void* allocate_or_null(int device, const std::function<cudaError_t(void** p)>& alloc) {
  DeviceGuard on(device);
  void* p = nullptr;
  cudaError_t err = alloc(&p);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // not sticky: clear it, the caller retries or reports
    return nullptr;
  }
  KILN_CUDA_CHECK(err);
  return p;
}

void* DeviceMemory::allocate(size_t bytes) {
  // A recording's private pool grows during its capture (private_memory.h):
  // cudaMalloc is no part of the graph, and the pool keeps the block for it.
  RelaxedCapture relaxed;
  return allocate_or_null(device_, [bytes](void** p) { return cudaMalloc(p, bytes); });
}

void DeviceMemory::release(void* p, size_t) {
  DeviceGuard on(device_);
  CaptureExclusion outside(device_, "freeing device memory (cudaFree synchronises the device)");
  KILN_CUDA_CHECK(cudaFree(p));
}

bool DeviceMemory::can_release() const { return !capturing_on(device_); }

std::string DeviceMemory::out_of_memory(size_t bytes, const MemoryStats& stats) {
  DeviceMemoryInfo info;
  {
    DeviceGuard on(device_);
    cudaMemGetInfo(&info.free, &info.total);
  }
  // The allocator emptied its cache and retried where it could release.
  return out_of_memory_message(device_, bytes, info, stats, can_release());
}

}  // namespace kiln::cuda
