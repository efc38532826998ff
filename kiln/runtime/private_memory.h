// The memory a recorded program owns (Backend::record): pools of its own
// over the device's raw memory and its offload pool's, which the buffers its
// kernels take while it is recorded (their scratch) come from. A CUDA graph
// replays the addresses it was captured with, so nothing it wrote to may go
// back to the device's shared pool, where other work would be handed it
// between two replays. What the private pools hold from the device counts
// in its shared pools' statistics (memory_stats) as allocated: the device
// has it in use.
//
// While a PrivateMemoryScope is alive on a thread, every Storage on the
// device made on that thread comes from the private pools, and goes back to
// them when freed. Replays of one program's recordings run one
// after another on the device's queue, so they share one PrivateMemory:
// what one recording frees, the next may reuse.
#pragma once
#include <cstddef>
#include <memory>

#include "kiln/runtime/allocator.h"
#include "kiln/runtime/device.h"

namespace kiln {

class PrivateMemory {
 public:
  explicit PrivateMemory(Device device);
  PrivateMemory(const PrivateMemory&) = delete;
  PrivateMemory& operator=(const PrivateMemory&) = delete;

  Device device() const { return device_; }
  // The private pool standing for the device's main pool (offload: false)
  // or its offload pool; null where the device has no offload pool.
  const std::shared_ptr<CachingAllocator>& pool(bool offload = false) const {
    return offload ? offload_pool_ : pool_;
  }
  MemoryStats stats() const { return pool_->stats(); }

 private:
  Device device_;
  std::shared_ptr<CachingAllocator> pool_, offload_pool_;
};

// Routes the calling thread's allocations on memory.device() to `memory`
// while alive. Scopes do not nest.
class PrivateMemoryScope {
 public:
  explicit PrivateMemoryScope(PrivateMemory& memory);
  ~PrivateMemoryScope();
  PrivateMemoryScope(const PrivateMemoryScope&) = delete;
  PrivateMemoryScope& operator=(const PrivateMemoryScope&) = delete;
};

// The calling thread's private memory for `device`, or null.
PrivateMemory* private_memory(Device device);

}  // namespace kiln
