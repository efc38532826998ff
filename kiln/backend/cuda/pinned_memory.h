// A CUDA device's offload pool: pinned, mapped host memory under the
// runtime's caching allocator, where activation offload keeps saved
// activations between the forward and the backward. Pinned, so copies to
// and from it run asynchronously on the device's stream; mapped, so a
// kernel can also read it in place (unified addressing). Stream-ordered as
// the device's memory is (device_memory.h): all of a device's work runs on
// its one stream.
#pragma once
#include "kiln/runtime/backend.h"  // MemoryStats, RawMemory

namespace kiln::cuda {

class PinnedMemory final : public RawMemory {
 public:
  explicit PinnedMemory(int device) : device_(device) {}
  void* allocate(size_t bytes) override;  // nullptr when none can be pinned
  void release(void* p, size_t bytes) override;
  bool can_release() const override;
  std::string out_of_memory(size_t bytes, const MemoryStats& stats) override;

 private:
  int device_;
};

}  // namespace kiln::cuda
