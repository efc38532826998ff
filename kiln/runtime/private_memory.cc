#include "kiln/runtime/private_memory.h"

#include "kiln/base/error.h"
#include "kiln/runtime/backend.h"

namespace kiln {
namespace {
thread_local PrivateMemory* active = nullptr;

// The raw memory under a device's pool, what is taken through it counted
// in that pool's statistics: the device has it in use, its measured peak
// counts it.
class CountedRawMemory final : public RawMemory {
 public:
  explicit CountedRawMemory(CachingAllocator& shared) : shared_(shared) {}
  void* allocate(size_t bytes) override {
    void* p = shared_.raw().allocate(bytes);
    if (p) shared_.count_held_elsewhere(int64_t(bytes));
    return p;
  }
  void release(void* p, size_t bytes) override {
    shared_.raw().release(p, bytes);
    shared_.count_held_elsewhere(-int64_t(bytes));
  }
  bool can_release() const override { return shared_.raw().can_release(); }
  // Said of the device's memory as a whole, the shared pool's statistics.
  std::string out_of_memory(size_t bytes, const MemoryStats&) override {
    return shared_.raw().out_of_memory(bytes, shared_.stats());
  }

 private:
  CachingAllocator& shared_;
};

// A pool over `shared`'s raw memory, counted in `shared`'s statistics.
std::shared_ptr<CachingAllocator> private_pool_over(CachingAllocator& shared) {
  struct Owned {
    explicit Owned(CachingAllocator& shared) : raw(shared), pool(raw) {}
    CountedRawMemory raw;
    CachingAllocator pool;  // after raw: empties its cache into it when destroyed
  };
  auto owned = std::make_shared<Owned>(shared);
  return std::shared_ptr<CachingAllocator>(owned, &owned->pool);
}

}  // namespace

PrivateMemory::PrivateMemory(Device device)
    : device_(device), pool_(private_pool_over(backend(device).allocator(device.index))) {
  if (CachingAllocator* offload = backend(device).offload_allocator(device.index))
    offload_pool_ = private_pool_over(*offload);
}

PrivateMemoryScope::PrivateMemoryScope(PrivateMemory& memory) {
  KILN_CHECK(!active, "private memory scopes do not nest");
  active = &memory;
}

PrivateMemoryScope::~PrivateMemoryScope() { active = nullptr; }

PrivateMemory* private_memory(Device device) {
  return active && active->device() == device ? active : nullptr;
}

}  // namespace kiln
