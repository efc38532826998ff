#include "kiln/runtime/backend.h"

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "kiln/base/error.h"
#include "kiln/runtime/private_memory.h"

namespace kiln {
namespace {

// Registries are never destroyed: queue threads may still be running
// kernels while the process exits, and everything they touch must outlive them.
std::map<DeviceKind, std::unique_ptr<Backend>>& backends() {
  static auto* b = new std::map<DeviceKind, std::unique_ptr<Backend>>;
  return *b;
}

struct Registered {
  Kernel kernel;
  int priority;
};
std::map<std::pair<DeviceKind, std::string>, Registered, std::less<>>& kernels() {
  static auto* k = new std::map<std::pair<DeviceKind, std::string>, Registered, std::less<>>;
  return *k;
}

std::vector<DrainFn>& drains() {
  static auto* d = new std::vector<DrainFn>;
  return *d;
}

}  // namespace

void register_kernel(DeviceKind device, std::string_view op, Kernel kernel, int priority) {
  auto [it, inserted] =
      kernels().emplace(std::pair{device, std::string(op)}, Registered{kernel, priority});
  if (inserted) return;
  if (it->second.priority == priority) fail("kernel for op '", op, "' registered twice");
  if (it->second.priority < priority) it->second = {kernel, priority};
}

void register_in_flight_drain(DrainFn drain) { drains().push_back(drain); }

void drain_in_flight() {
  for (DrainFn d : drains()) d();
}

const Kernel* find_kernel(DeviceKind device, std::string_view op) {
  auto it = kernels().find(std::pair{device, std::string(op)});
  return it == kernels().end() ? nullptr : &it->second.kernel;
}

void register_backend(std::unique_ptr<Backend> b) {
  DeviceKind k = b->kind();
  backends()[k] = std::move(b);
}

Backend* find_backend(DeviceKind kind) {
  auto it = backends().find(kind);
  return it == backends().end() ? nullptr : it->second.get();
}

Backend& backend(Device d) {
  Backend* b = find_backend(d.kind);
  KILN_CHECK(b, "device '", to_string(d), "' is not available: this kiln was built without its backend");
  const int n = b->device_count();
  if (d.index < 0 || d.index >= n)
    fail("device '", to_string(d), "' does not exist: ",
         n == 0 ? cat("this machine has none (", b->no_device_reason(), ")")
                : cat(n, " found, numbered from 0",
                      d.kind == DeviceKind::cpu ? " (KILN_CPU_DEVICES=N makes N host devices)" : ""),
         "; `kiln info` lists the devices");
  return *b;
}

namespace {
class CalledAgain final : public RecordedWork {
 public:
  explicit CalledAgain(std::function<void()> work) : work_(std::move(work)) {}
  void replay() override { work_(); }

 private:
  std::function<void()> work_;
};
}  // namespace

std::unique_ptr<RecordedWork> Backend::record(int, std::function<void()> work) {
  return std::make_unique<CalledAgain>(std::move(work));
}

namespace {
CachingAllocator& pool_of(Device d, Pool p) {
  Backend& b = backend(d);
  if (p == Pool::device) return b.allocator(d.index);
  CachingAllocator* offload = b.offload_allocator(d.index);
  KILN_CHECK(offload, "activation offload: ", to_string(d),
             " has no offload pool in this kiln; use activation_checkpoint.mode none, selective or full");
  return *offload;
}
}  // namespace

Storage::Storage(Device d, size_t bytes, Pool p) : device(d), nbytes(bytes), pool(p) {
  // No private offload pool where the device has none: pool_of says so.
  if (PrivateMemory* mine = private_memory(d)) private_pool = mine->pool(p == Pool::offload);
  data = private_pool ? private_pool->allocate(bytes) : pool_of(d, p).allocate(bytes);
}

Storage::Storage(Device d, void* borrowed, size_t bytes, std::function<void()> release_fn)
    : device(d), data(borrowed), nbytes(bytes), release(std::move(release_fn)) {}

Storage::~Storage() {
  if (release) {
    if (!quarantined(data, nbytes)) release();  // else a transport may still write there
  } else if (private_pool) {
    private_pool->free(data, nbytes);
  } else {
    pool_of(device, pool).free(data, nbytes);
  }
}

int64_t distinct_bytes(std::span<const std::shared_ptr<Storage>> storages) {
  int64_t bytes = 0;
  for (size_t i = 0; i < storages.size(); ++i) {
    const Storage* s = storages[i].get();
    bool seen = !s;
    for (size_t j = 0; j < i && !seen; ++j) seen = storages[j].get() == s;
    if (!seen) bytes += int64_t(s->nbytes);
  }
  return bytes;
}

MemoryStats memory_stats(Device d, Pool p) { return pool_of(d, p).stats(); }
void reset_peak_memory(Device d, Pool p) { pool_of(d, p).reset_peak(); }
void empty_cache(Device d) {
  backend(d).allocator(d.index).empty_cache();
  if (CachingAllocator* offload = backend(d).offload_allocator(d.index)) offload->empty_cache();
}

}  // namespace kiln
