// A CUDA device's raw memory, under the runtime's caching allocator.
//
// Stream-ordered by construction: every kernel of a device runs on its one
// in-order stream (stream.h), so a block the host frees as soon as it drops
// its handle (while the work that used it may still be running) is handed
// out again only to work enqueued later, which the stream runs after it.
// Blocks go back to the driver only in empty_cache(), through cudaFree,
// which waits for the device first.
#pragma once
#include <cuda_runtime.h>

#include <functional>

#include "kiln/runtime/backend.h"  // MemoryStats, RawMemory

namespace kiln::cuda {

// Runs `alloc` (cudaMalloc, cudaHostAlloc, ...) with `device` current: the
// pointer, or nullptr when CUDA is out of that memory (the error is
// cleared, so the caller can empty its cache and retry, or report).
void* allocate_or_null(int device, const std::function<cudaError_t(void** p)>& alloc);

class DeviceMemory final : public RawMemory {
 public:
  explicit DeviceMemory(int device) : device_(device) {}
  void* allocate(size_t bytes) override;  // nullptr when the device is out of memory
  void release(void* p, size_t bytes) override;
  bool can_release() const override;
  std::string out_of_memory(size_t bytes, const MemoryStats& stats) override;

 private:
  int device_;
};

}  // namespace kiln::cuda
