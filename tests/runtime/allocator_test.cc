#include "kiln/runtime/allocator.h"

#include <gtest/gtest.h>

#include "kiln/base/error.h"

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

// Memory of a fixed capacity: nullptr once it is used up.
class LimitedMemory : public RawMemory {
 public:
  explicit LimitedMemory(size_t capacity) : left(capacity) {}
  void* allocate(size_t bytes) override {
    if (bytes > left) return nullptr;
    left -= bytes;
    return ::operator new(bytes);
  }
  void release(void* p, size_t bytes) override {
    left += bytes;
    ::operator delete(p);
  }
  size_t left;
};

TEST(CachingAllocator, EmptiesItsCacheAndRetriesOnceWhenOutOfMemory) {
  LimitedMemory raw(4096);
  CachingAllocator a(raw);
  void* small = a.allocate(3000);
  a.free(small, 3000);  // cached, in a class the next request cannot use
  void* big = a.allocate(4000);
  EXPECT_NE(big, nullptr);
  EXPECT_EQ(a.stats().reserved, int64_t(CachingAllocator::round_size(4000)));
  a.free(big, 4000);
}

TEST(CachingAllocator, OutOfMemoryAfterTheRetryIsAnErrorNamingTheRequest) {
  LimitedMemory raw(4096);
  CachingAllocator a(raw);
  void* held = a.allocate(3000);
  try {
    a.allocate(2000);
    FAIL() << "expected an out-of-memory error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("out of memory allocating 2000 bytes"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(a.stats().allocated, int64_t(CachingAllocator::round_size(3000)));
  a.free(held, 3000);
}

// Memory that may not be released now (a GPU's, on a thread capturing a
// CUDA graph): an allocation that fails is out of memory at once, and the
// cached blocks stay cached rather than being lost to a refused release.
class UnreleasableMemory : public LimitedMemory {
 public:
  using LimitedMemory::LimitedMemory;
  void release(void* p, size_t bytes) override {
    ASSERT_TRUE(can_release_now) << "released while it may not be";
    LimitedMemory::release(p, bytes);
  }
  bool can_release() const override { return can_release_now; }
  bool can_release_now = false;
};

TEST(CachingAllocator, KeepsItsCacheWhereNothingMayBeReleased) {
  UnreleasableMemory raw(4096);
  CachingAllocator a(raw);
  void* small = a.allocate(3000);
  a.free(small, 3000);
  EXPECT_THROW(a.allocate(4000), Error);
  EXPECT_EQ(a.stats().reserved, int64_t(CachingAllocator::round_size(3000))) << "still cached";
  EXPECT_EQ(a.allocate(3000), small) << "and handed out again";
  a.free(small, 3000);
  raw.can_release_now = true;
  void* big = a.allocate(4000);  // now the cache is emptied for it
  EXPECT_NE(big, nullptr);
  a.free(big, 4000);
}

// Hands out pieces of a static buffer: a quarantined block is never
// released, and a heap block would be a leak to LeakSanitizer.
class StaticMemory : public RawMemory {
 public:
  void* allocate(size_t bytes) override {
    if (used + bytes > sizeof buffer) return nullptr;
    used += bytes;
    return buffer + used - bytes;
  }
  void release(void*, size_t) override { ++releases; }
  alignas(64) static inline char buffer[1 << 16];
  size_t used = 0;
  int releases = 0;
};

TEST(CachingAllocator, NeverReusesOrReleasesABlockOverlappingQuarantinedMemory) {
  StaticMemory raw;
  CachingAllocator a(raw);
  auto* p = static_cast<char*>(a.allocate(4096));
  quarantine(p + 1000, 8);  // a transfer into a slice of it (a program's arena)
  a.free(p, 4096);
  EXPECT_EQ(a.stats().quarantined, 4096);
  EXPECT_EQ(a.stats().allocated, 0);
  void* q = a.allocate(4096);
  EXPECT_NE(q, p);
  a.free(q, 4096);  // q lies beyond the quarantined bytes: reused as usual
  EXPECT_EQ(a.allocate(4096), q);
  a.free(q, 4096);
  a.empty_cache();
  EXPECT_EQ(raw.releases, 1);  // q's only
  EXPECT_EQ(a.stats().reserved, 4096);
}

TEST(DeviceMemory, BorrowedMemoryAQuarantineOverlapsIsNeverGivenBack) {
  alignas(64) static char owned[2][256];
  int released = 0;
  for (char* p : owned) {
    Storage s(kCPU, p, sizeof owned[0], [&released] { ++released; });
    if (p == owned[1]) quarantine(p + 8, 8);
  }
  EXPECT_EQ(released, 1);
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
