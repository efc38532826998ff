// The caching allocator: freed blocks are kept in size classes and handed
// out again, so steady-state training allocates nothing from the system.
// When the system has no memory left, the cache is emptied and the request
// tried once more before it fails (as PyTorch's does).
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace kiln {

struct MemoryStats {
  int64_t allocated = 0;       // bytes in live tensors
  int64_t peak_allocated = 0;  // high-water mark of `allocated` since the last reset
  int64_t reserved = 0;        // bytes held from the system (live + cached)
  int64_t num_allocs = 0;      // allocations served
  int64_t num_system_allocs = 0;  // of which needed memory from the system
  int64_t quarantined = 0;     // bytes in freed blocks kept out of use (see quarantine)
};

// Marks [p, p + bytes) as memory another party may still write into: an
// MPI transfer that timed out cannot be cancelled, and a late peer's data
// still lands in its buffers. A caching allocator's block that overlaps it
// is, once freed, never handed out again nor returned to the system (it
// leaks, counted in MemoryStats::quarantined); a tensor on borrowed memory
// (a NumPy or DLPack import) never gives it back to its owner.
void quarantine(const void* p, size_t bytes);
// Whether [p, p + bytes) overlaps memory quarantined so far.
bool quarantined(const void* p, size_t bytes);

// Raw memory of one device. The caching layer sits on top of it.
class RawMemory {
 public:
  virtual ~RawMemory() = default;
  virtual void* allocate(size_t bytes) = 0;  // nullptr when out of memory
  virtual void release(void* p, size_t bytes) = 0;
  // Whether the calling thread may release now: a GPU's memory is not freed
  // by a thread capturing a CUDA graph there (cudaFree synchronises).
  virtual bool can_release() const { return true; }
  // The error message for a request of `bytes` that failed even after the
  // cache was emptied; `stats` is the allocator's state at that moment.
  virtual std::string out_of_memory(size_t bytes, const MemoryStats& stats);
};

class CachingAllocator {
 public:
  explicit CachingAllocator(RawMemory& raw) : raw_(raw) {}
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  void* allocate(size_t bytes);  // throws kiln::Error when out of memory
  void free(void* p, size_t bytes);
  MemoryStats stats() const;
  void reset_peak();
  void empty_cache();  // returns every cached block to the system
  // Memory a second pool over the same raw memory holds from it (a
  // recording's private pool: private_memory.h), counted in this pool's
  // statistics as allocated and reserved, the device's memory in use;
  // negative: given back.
  void count_held_elsewhere(int64_t bytes);

  // The size class a request is rounded up to.
  static size_t round_size(size_t bytes);
  // The memory under the cache (a second pool over it: PrivateMemory).
  RawMemory& raw() const { return raw_; }

 private:
  RawMemory& raw_;
  mutable std::mutex mu_;
  std::map<size_t, std::vector<void*>> cache_;
  void release_cached();  // with mu_ held
  MemoryStats stats_;
};

}  // namespace kiln
