#include "kiln/runtime/allocator.h"

#include <gtest/gtest.h>

#include "kiln/runtime/backend.h"
#include "kiln/runtime/tensor.h"

namespace kiln {
namespace {

class CountingMemory : public RawMemory {
 public:
  void* allocate(size_t bytes) override {
    ++allocs;
    return ::operator new(bytes);
  }
  void release(void* p, size_t) override {
    ++releases;
    ::operator delete(p);
  }
  int allocs = 0, releases = 0;
};

TEST(CachingAllocator, ReusesFreedBlocksOfTheSameClass) {
  CountingMemory raw;
  CachingAllocator a(raw);
  void* p = a.allocate(1000);
  a.free(p, 1000);
  void* q = a.allocate(1000);
  EXPECT_EQ(p, q);
  EXPECT_EQ(raw.allocs, 1);
  a.free(q, 1000);
}

TEST(CachingAllocator, TracksAllocatedPeakAndReserved) {
  CountingMemory raw;
  CachingAllocator a(raw);
  size_t big = 3 << 20;
  void* p = a.allocate(big);
  void* q = a.allocate(64);
  MemoryStats s = a.stats();
  int64_t both = int64_t(CachingAllocator::round_size(big) + CachingAllocator::round_size(64));
  EXPECT_EQ(s.allocated, both);
  EXPECT_EQ(s.peak_allocated, both);
  a.free(p, big);
  s = a.stats();
  EXPECT_EQ(s.allocated, 64);
  EXPECT_EQ(s.peak_allocated, both);
  EXPECT_EQ(s.reserved, both);
  a.reset_peak();
  EXPECT_EQ(a.stats().peak_allocated, 64);
  a.empty_cache();
  EXPECT_EQ(a.stats().reserved, 64);
  EXPECT_EQ(raw.releases, 1);
  a.free(q, 64);
}

TEST(CachingAllocator, SizeClassesBoundWaste) {
  for (size_t n : {1ul, 63ul, 65ul, 1000ul, (1ul << 20) + 1, 5ul << 20, (100ul << 20) + 7}) {
    size_t r = CachingAllocator::round_size(n);
    EXPECT_GE(r, n);
    EXPECT_LE(double(r), std::max(double(n) + 63, 1.25 * double(n))) << n;
  }
}

TEST(DeviceMemory, TensorsReturnMemoryToTheCache) {
  synchronize();
  int64_t before = memory_stats().allocated;
  {
    Tensor t = zeros({1024, 1024});
    synchronize();
    EXPECT_GE(memory_stats().allocated, before + 4 * 1024 * 1024);
  }
  synchronize();
  EXPECT_EQ(memory_stats().allocated, before);
  reset_peak_memory();
  EXPECT_EQ(memory_stats().peak_allocated, memory_stats().allocated);
}

}  // namespace
}  // namespace kiln
