#include "kiln/backend/cpu/parallel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "kiln/runtime/threads.h"

namespace kiln::cpu {
namespace {

// Sets kiln's thread count for one test.
class Threads {
 public:
  explicit Threads(int n) : saved_(num_threads()) { set_num_threads(n); }
  ~Threads() { set_num_threads(saved_); }

 private:
  int saved_;
};

// The (begin, end) calls parallel_for makes, in order of begin, and whether
// all of them ran on the calling thread.
struct Calls {
  std::vector<std::pair<int64_t, int64_t>> ranges;
  bool on_caller = true;
};

Calls calls(int64_t n, int64_t cost) {
  Calls c;
  std::mutex mu;
  const auto caller = std::this_thread::get_id();
  parallel_for(n, cost, [&](int64_t b, int64_t e) {
    std::lock_guard<std::mutex> lock(mu);
    c.ranges.push_back({b, e});
    c.on_caller = c.on_caller && std::this_thread::get_id() == caller;
  });
  std::sort(c.ranges.begin(), c.ranges.end());
  return c;
}

TEST(ParallelFor, LessWorkThanTwoThreadsEachGetRunsWholeOnTheCallingThread) {
  Threads t(4);
  for (auto [n, cost] : {std::pair<int64_t, int64_t>{1, 1 << 20}, {100, 1},
                         {2 * kMinChunkWork - 1, 1}, {64, kMinChunkWork / 32 - 1}}) {
    Calls c = calls(n, cost);
    ASSERT_EQ(c.ranges.size(), 1u) << n << " x " << cost;
    EXPECT_EQ(c.ranges[0], std::make_pair(int64_t{0}, n));
    EXPECT_TRUE(c.on_caller);
  }
}

TEST(ParallelFor, ChunksCoverTheRangeOnceWithTheMinimumWorkPerChunk) {
  Threads t(4);
  const int64_t n = 1000, cost = kMinChunkWork / 100;  // 9 chunks' worth
  Calls c = calls(n, cost);
  EXPECT_EQ(c.ranges.size(), 9u);
  int64_t next = 0;
  for (auto [b, e] : c.ranges) {
    EXPECT_EQ(b, next);
    next = e;
  }
  EXPECT_EQ(next, n);
}

TEST(ParallelFor, ChunkCountIsCappedByThreadsAndIndices) {
  EXPECT_EQ(parallel_chunks(1 << 30, 1, 1), 1);
  EXPECT_EQ(parallel_chunks(64, kMinChunkWork / 32, 4), 2);
  EXPECT_EQ(parallel_chunks(1 << 30, 1, 3), 12);
  EXPECT_EQ(parallel_chunks(3, kMinChunkWork * 10, 8), 3);
  EXPECT_EQ(parallel_chunks(10, 0, 8), 1);  // a cost below 1 counts as 1
}

TEST(ParallelFor, ResultsDoNotDependOnTheThreadCount) {
  const int64_t n = 1 << 20;
  auto run = [&](int threads) {
    Threads t(threads);
    std::vector<float> out(static_cast<size_t>(n));
    parallel_for(n, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) out[size_t(i)] = float(i % 97) * 0.5f + 1.0f;
    });
    return out;
  };
  std::vector<float> one = run(1);
  for (int threads : {2, 3, 8}) EXPECT_EQ(run(threads), one) << threads << " threads";
}

}  // namespace
}  // namespace kiln::cpu
