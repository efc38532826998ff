#include "kiln/runtime/allocator.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <exception>
#include <utility>

#include "kiln/base/error.h"

namespace kiln {
namespace {

struct Quarantine {
  std::atomic<bool> any{false};  // the common case skips the lock
  std::mutex mu;
  std::vector<std::pair<uintptr_t, uintptr_t>> ranges;  // [begin, end)
};

Quarantine& quarantined_ranges() {
  static Quarantine* q = new Quarantine();  // allocators freeing at exit still ask
  return *q;
}

}  // namespace

bool quarantined(const void* p, size_t bytes) {
  Quarantine& q = quarantined_ranges();
  if (!q.any.load(std::memory_order_acquire)) return false;
  const auto begin = reinterpret_cast<uintptr_t>(p), end = begin + bytes;
  std::lock_guard lock(q.mu);
  return std::any_of(q.ranges.begin(), q.ranges.end(),
                     [&](const auto& r) { return r.first < end && begin < r.second; });
}

void quarantine(const void* p, size_t bytes) {
  if (!p || !bytes) return;
  Quarantine& q = quarantined_ranges();
  const auto begin = reinterpret_cast<uintptr_t>(p);
  std::lock_guard lock(q.mu);
  q.ranges.emplace_back(begin, begin + bytes);
  q.any.store(true, std::memory_order_release);
}

size_t CachingAllocator::round_size(size_t bytes) {
  // 64-byte granules for small blocks; above 1 MiB, granules of a quarter
  // of the largest power of two below the size, which bounds waste at 25%
  // and keeps the number of classes small.
  constexpr size_t kSmall = 1 << 20;
  if (bytes <= kSmall) return std::max<size_t>(64, (bytes + 63) & ~size_t(63));
  size_t p = size_t(1) << (63 - __builtin_clzll(bytes));
  size_t granule = p / 4;
  return (bytes + granule - 1) / granule * granule;
}

std::string RawMemory::out_of_memory(size_t bytes, const MemoryStats& stats) {
  return cat("out of memory allocating ", bytes, " bytes (", stats.reserved,
             " bytes reserved, all of them in live tensors)");
}

// Never throws (a destructor that does terminates the process): a release
// can fail for a reason it cannot act on (cudaFree returns errors of earlier
// asynchronous work), so the failure is reported and the blocks left.
CachingAllocator::~CachingAllocator() {
  try {
    empty_cache();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln: warning: a memory pool could not return its memory: %s\n",
                 e.what());
  }
}

void* CachingAllocator::allocate(size_t bytes) {
  size_t size = round_size(bytes);
  std::lock_guard lock(mu_);
  void* p = nullptr;
  auto it = cache_.find(size);
  if (it != cache_.end() && !it->second.empty()) {
    p = it->second.back();
    it->second.pop_back();
  } else {
    p = raw_.allocate(size);
    if (!p && raw_.can_release()) {
      // Cached blocks of other sizes may be what the request needs.
      release_cached();
      p = raw_.allocate(size);
    }
    if (!p) fail(raw_.out_of_memory(bytes, stats_));
    stats_.reserved += static_cast<int64_t>(size);
    ++stats_.num_system_allocs;
  }
  ++stats_.num_allocs;
  stats_.allocated += static_cast<int64_t>(size);
  stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.allocated);
  return p;
}

void CachingAllocator::free(void* p, size_t bytes) {
  if (!p) return;
  size_t size = round_size(bytes);
  const bool keep_out = quarantined(p, size);
  std::lock_guard lock(mu_);
  stats_.allocated -= static_cast<int64_t>(size);
  if (keep_out)
    stats_.quarantined += static_cast<int64_t>(size);
  else
    cache_[size].push_back(p);
}

MemoryStats CachingAllocator::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void CachingAllocator::reset_peak() {
  std::lock_guard lock(mu_);
  stats_.peak_allocated = stats_.allocated;
}

void CachingAllocator::count_held_elsewhere(int64_t bytes) {
  std::lock_guard lock(mu_);
  stats_.allocated += bytes;
  stats_.reserved += bytes;
  stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.allocated);
}

void CachingAllocator::empty_cache() {
  std::lock_guard lock(mu_);
  release_cached();
}

// Each block leaves the cache before it is released, so a release that
// throws never leaves a freed block there to be handed out again.
void CachingAllocator::release_cached() {
  while (!cache_.empty()) {
    auto it = cache_.begin();
    const size_t size = it->first;
    if (it->second.empty()) {
      cache_.erase(it);
      continue;
    }
    void* p = it->second.back();
    it->second.pop_back();
    stats_.reserved -= static_cast<int64_t>(size);
    raw_.release(p, size);
  }
}

}  // namespace kiln
