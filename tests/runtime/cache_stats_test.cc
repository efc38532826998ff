// The compile cache's counters per kind and their text across runs
// (kiln/runtime/cache_stats.h, CompileCache::record_run_stats).
#include "kiln/runtime/cache_stats.h"

#include <gtest/gtest.h>

#include <cstdint>

#include "kiln/runtime/compile_cache.h"
#include "tests/support/temp_dir.h"

namespace kiln {
namespace {

TEST(CacheStats, TextRoundTripsAndSkipsWhatDoesNotParse) {
  std::map<std::string, KindStats> kinds;
  kinds["program"].l3 = {2, 1, 1, 1024, 2048, 0.25};
  kinds["cpu_fused_so"].l1 = {9, 9, 0, 99, 0, 0};
  std::string text = format_run_stats(kinds);
  std::map<std::string, KindStats> back = parse_run_stats(text);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back["program"].l3.hits, 1);
  EXPECT_EQ(back["program"].l3.compile_seconds, 0.25);
  EXPECT_EQ(back["cpu_fused_so"].l1.requests, 9);
  back = parse_run_stats(text + "garbage\nprogram l9 1 1 0 0 0 0\nprogram l1 -1 0 0 0 0 0\n"
                                "program l1 1 1 0 0 0 nan\nprogram l1 5 5 0 0 0 0 extra\n");
  EXPECT_EQ(back["program"].l1.requests, 0) << "every bad line skipped";
  back = parse_run_stats("program l2 1 1 0 0 0 0\nprogram l2 7 3 4 0 0 0\n");
  EXPECT_EQ(back["program"].l2.requests, 7) << "the later line counts";
}

TEST(CacheStats, SumsSaturate) {
  TierStats a{INT64_MAX - 1, 0, 0, 0, 0, 1.0}, b{5, 1, 0, 0, 0, 2.0};
  add_stats(a, b);
  EXPECT_EQ(a.requests, INT64_MAX);
  EXPECT_EQ(a.hits, 1);
  EXPECT_EQ(a.compile_seconds, 3.0);
}

// Lookups count per kind as well as per tier; recording adds them to what
// L3 kept from earlier runs.
TEST(CacheStats, CountedPerKindAndRecordedAcrossRuns) {
  test::TempDir dir;
  CompileCache::Options o;
  o.l3_dir = dir.path() + "/l3";
  for (int run = 0; run < 2; ++run) {
    CompileCache cache(o);
    cache.get_or_compile({{1, 2, 3}, "program"}, [] { return std::string("compiled"); });
    cache.get({{4, 5, 6}, "cpu_fused_so"});
    CacheStats s = cache.stats();
    EXPECT_EQ(s.kinds.at("program").l3.requests, 1);
    EXPECT_EQ(s.kinds.at("program").l3.hits, run);  // compiled by the first run, found by the second
    EXPECT_EQ(s.kinds.at("cpu_fused_so").l3.misses, 1);
    EXPECT_EQ(s.l3.requests, 2);
    cache.record_run_stats();
  }
  std::map<std::string, KindStats> kept = CompileCache(o).recorded_stats();
  EXPECT_EQ(kept.at("program").l3.requests, 2);
  EXPECT_EQ(kept.at("program").l3.hits, 1);
  EXPECT_GE(kept.at("program").l3.compile_seconds, 0);
  EXPECT_EQ(kept.at("cpu_fused_so").l3.misses, 2);
}

}  // namespace
}  // namespace kiln
