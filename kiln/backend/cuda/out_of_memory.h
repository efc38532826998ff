// The error for a device allocation that failed, after kiln emptied its
// cache and retried (`retried`; a thread capturing a CUDA graph cannot):
// what was asked, what the device had, what kiln held, and what to try. A
// pure function, so its text is tested without a GPU.
#pragma once
#include <cstddef>
#include <string>

#include "kiln/runtime/backend.h"  // MemoryStats, RawMemory

namespace kiln::cuda {

struct DeviceMemoryInfo {
  size_t free = 0, total = 0;  // cudaMemGetInfo's, at the failure
};

std::string out_of_memory_message(int device, size_t requested, const DeviceMemoryInfo& info,
                                  const MemoryStats& stats, bool retried);

}  // namespace kiln::cuda
