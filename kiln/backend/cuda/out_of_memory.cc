#include "kiln/backend/cuda/out_of_memory.h"

#include <cstdio>

#include "kiln/base/bytes.h"
#include "kiln/base/error.h"

namespace kiln::cuda {
std::string out_of_memory_message(int device, size_t requested, const DeviceMemoryInfo& info,
                                  const MemoryStats& stats, bool retried) {
  return cat("CUDA out of memory on cuda:", device, ": allocating ", bytes_text(double(requested), 2),
             " (", requested, " bytes) failed with ", bytes_text(double(info.free), 2), " free of ",
             bytes_text(double(info.total), 2), "; kiln holds ", bytes_text(double(stats.reserved), 2),
             " reserved, ", bytes_text(double(stats.allocated), 2),
             " of it in live tensors (",
             retried ? std::string("its cache was emptied and the allocation retried")
                     : cat(stats.reserved == stats.allocated ? "nothing cached"
                                                             : "the rest is its cache",
                           "; not retried: a thread capturing a CUDA graph cannot return "
                           "memory to CUDA"),
             "). "
             "Keep fewer activations for the backward (--activation_checkpoint.mode=selective "
             "or full), use a smaller batch (--training.local_batch_size), or free tensors "
             "that are no longer needed");
}

}  // namespace kiln::cuda
