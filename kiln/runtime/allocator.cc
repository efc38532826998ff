#include "kiln/runtime/allocator.h"

#include <algorithm>

#include "kiln/base/error.h"

namespace kiln {

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

CachingAllocator::~CachingAllocator() { empty_cache(); }

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
    if (!p) {
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
  std::lock_guard lock(mu_);
  cache_[size].push_back(p);
  stats_.allocated -= static_cast<int64_t>(size);
}

MemoryStats CachingAllocator::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void CachingAllocator::reset_peak() {
  std::lock_guard lock(mu_);
  stats_.peak_allocated = stats_.allocated;
}

void CachingAllocator::empty_cache() {
  std::lock_guard lock(mu_);
  release_cached();
}

void CachingAllocator::release_cached() {
  for (auto& [size, blocks] : cache_) {
    for (void* p : blocks) raw_.release(p, size);
    stats_.reserved -= static_cast<int64_t>(size * blocks.size());
  }
  cache_.clear();
}

}  // namespace kiln
