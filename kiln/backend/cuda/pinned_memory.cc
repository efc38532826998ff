#include "kiln/backend/cuda/pinned_memory.h"

#include <cuda_runtime.h>

#include "kiln/backend/cuda/check.h"
#include "kiln/backend/cuda/cuda_graph.h"
#include "kiln/backend/cuda/device_memory.h"
#include "kiln/backend/cuda/devices.h"
#include "kiln/base/error.h"

namespace kiln::cuda {

void* PinnedMemory::allocate(size_t bytes) {
  // A recording's private offload pool grows during its capture
  // (private_memory.h): cudaHostAlloc is no part of the graph, and the pool
  // keeps the block for it.
  RelaxedCapture relaxed;
  return allocate_or_null(device_, [bytes](void** p) {
    return cudaHostAlloc(p, bytes, cudaHostAllocPortable | cudaHostAllocMapped);
  });
}

void PinnedMemory::release(void* p, size_t) {
  DeviceGuard on(device_);
  CaptureExclusion outside(device_, "freeing pinned memory (cudaFreeHost synchronises the device)");
  KILN_CUDA_CHECK(cudaFreeHost(p));
}

bool PinnedMemory::can_release() const { return !capturing_on(device_); }

std::string PinnedMemory::out_of_memory(size_t bytes, const MemoryStats& stats) {
  return cat("cuda:", device_, ": out of pinned host memory for activation offload, allocating ",
             bytes, " bytes (the offload pool holds ", stats.reserved, " bytes, ",
             stats.reserved == stats.allocated
                 ? std::string("all of them in live activations")
                 : cat(stats.allocated, " of them in live activations and the rest cached, "
                       "which a thread capturing a CUDA graph cannot return to CUDA"),
             "); offload fewer activations "
             "(activation_checkpoint.mode selective or full) or free host memory");
}

}  // namespace kiln::cuda
