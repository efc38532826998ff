#include "kiln/runtime/private_memory.h"

#include "kiln/base/error.h"
#include "kiln/runtime/backend.h"

namespace kiln {
namespace {
thread_local PrivateMemory* active = nullptr;
}  // namespace

PrivateMemory::PrivateMemory(Device device)
    : device_(device),
      pool_(std::make_shared<CachingAllocator>(backend(device).allocator(device.index).raw())) {
  if (CachingAllocator* offload = backend(device).offload_allocator(device.index))
    offload_pool_ = std::make_shared<CachingAllocator>(offload->raw());
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
