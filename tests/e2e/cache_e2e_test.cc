// `kiln cache stats` and `kiln cache clear` on cache directories the test
// fills through the library, as a user would see them.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <map>

#include "kiln/runtime/compile_cache.h"
#include "tests/support/cli.h"
#include "tests/support/temp_dir.h"
#include "tests/support/train_run.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using test::run_cli;

class CacheCli : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(temp_.path().empty());
    dir_ = temp_.path();
    l2_ = (dir_ / "l2").string();
    l3_ = (dir_ / "l3").string();
    env_ = "KILN_CACHE= KILN_L2_CACHE_DIR=" + l2_ + " KILN_CACHE_DIR=" + l3_;
  }

  CompileCache::Options options(bool l2, bool l3) {
    CompileCache::Options o;
    o.l2_dir = l2 ? l2_ : "";
    o.l3_dir = l3 ? l3_ : "";
    return o;
  }
  static CacheKey key(uint64_t n) { return {{n, 1, 2}, "program"}; }

  test::TempDir temp_;
  fs::path dir_;
  std::string l2_, l3_, env_;
};

TEST_F(CacheCli, StatsShowsEachTiersDirectoryAndEntries) {
  CompileCache cache(options(true, true));
  cache.put(key(1), std::string(1000, 'a'));
  cache.put(key(2), std::string(3000, 'b'));
  CompileCache::Options older = options(false, true);
  older.identity.kiln_version = "0.0.1";
  CompileCache(older).put(key(3), "from an older kiln");

  auto r = run_cli("cache stats", env_);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find(std::string("kiln compile cache (kiln ") + KILN_VERSION), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("L2 host-local:  " + l2_ + ": 2 entries, "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("L3 persistent:  " + l3_ + ": 3 entries, "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("(1 stale, 0 corrupt)"), std::string::npos) << r.output;

  r = run_cli("cache stats", "KILN_CACHE=off");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("L2 host-local:  off (KILN_CACHE=off)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("L3 persistent:  off (KILN_CACHE=off)"), std::string::npos) << r.output;
}

TEST_F(CacheCli, ClearEmptiesTheChosenTiers) {
  CompileCache cache(options(true, true));
  cache.put(key(1), "one");
  cache.put(key(2), "two");

  auto r = run_cli("cache clear --l3", env_);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("L3 " + l3_ + ": removed 2 entries"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("L2"), std::string::npos) << "--l3 leaves L2 alone: " << r.output;
  EXPECT_EQ(cache.disk_usage(CacheTier::l3).entries, 0);
  EXPECT_EQ(cache.disk_usage(CacheTier::l2).entries, 2);

  r = run_cli("cache clear", env_);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("L2 " + l2_ + ": removed 2 entries"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("L3 " + l3_ + ": removed 0 entries"), std::string::npos) << r.output;
  EXPECT_TRUE(fs::is_empty(l2_));

  r = run_cli("cache stats", env_);
  EXPECT_NE(r.output.find(l2_ + ": 0 entries, 0 B"), std::string::npos) << r.output;

  r = run_cli("cache clear", "KILN_CACHE=off");
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("L2 off (KILN_CACHE=off): nothing to remove"), std::string::npos) << r.output;
}

// --stale deletes what this build cannot use and keeps what it can.
TEST_F(CacheCli, ClearStaleKeepsTheEntriesThisBuildUses) {
  CompileCache cache(options(true, true));
  cache.put(key(1), "current");
  CompileCache::Options older = options(true, true);
  older.identity.build = "an earlier build";
  CompileCache(older).put(key(2), "from an earlier build");
  CompileCache(older).put(key(3), "from an earlier build too");
  temp_.write("l3/000000000000000000000000000000000000000000000001-program.kce", "not an entry");
  EXPECT_EQ(cache.disk_usage(CacheTier::l3).entries, 4);

  auto r = run_cli("cache stats", env_);
  EXPECT_NE(r.output.find("`kiln cache clear --stale` removes them"), std::string::npos) << r.output;
  r = run_cli("cache clear --stale", env_);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("L2 " + l2_ + ": removed 2 unusable entries"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("L3 " + l3_ + ": removed 3 unusable entries"), std::string::npos) << r.output;
  for (CacheTier t : {CacheTier::l2, CacheTier::l3}) {
    CacheDir::Usage u = cache.disk_usage(t);
    EXPECT_EQ(u.entries, 1) << cache_tier_name(t);
    EXPECT_EQ(u.stale + u.corrupt, 0) << cache_tier_name(t);
  }
  CompileCache fresh(options(false, true));  // no L1: reads the file
  EXPECT_EQ(fresh.get(key(1)), std::optional<std::string>("current"));
}

// Runs record their lookups in L3; `kiln cache stats` adds them up per kind
// (programs apart from each backend's kernels), and clear forgets them.
TEST_F(CacheCli, StatsReportsRecordedHitsAndCompileSecondsPerKind) {
  auto r = run_cli("cache stats", env_);
  EXPECT_NE(r.output.find("recorded runs: none"), std::string::npos) << r.output;
  auto corpus = dir_ / "corpus.txt";
  test::write_grammar_corpus(corpus.string());
  for (int run = 0; run < 2; ++run) {
    r = run_cli("train --config llama3_debug --compile.graph_trainer --training.steps 1"
                " --checkpoint.enable=false --metrics.enable_tensorboard false --data.path " +
                    corpus.string() + " --data.text_split line --job.dump_folder " +
                    (dir_ / ("run" + std::to_string(run))).string(),
                env_);
    ASSERT_EQ(r.status, 0) << r.output;
  }
  std::map<std::string, KindStats> kinds = CompileCache(options(true, true)).recorded_stats();
  ASSERT_TRUE(kinds.count("program")) << "no program lookups recorded";
  const KindStats& program = kinds.at("program");
  EXPECT_GT(program.l3.compile_seconds, 0) << "the first run compiled the step";
  EXPECT_GE(program.l1.hits + program.l2.hits, 1) << "the second run found it";
  r = run_cli("cache stats", env_);
  EXPECT_NE(r.output.find("recorded runs (hits/requests per tier, compile seconds):"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("\n  program "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\n  cpu_fused_so "), std::string::npos) << r.output;
  run_cli("cache clear", env_);
  EXPECT_FALSE(fs::exists(fs::path(l3_) / CacheDir::kRunStats)) << "clear removes the statistics too";
  EXPECT_NE(run_cli("cache stats", env_).output.find("recorded runs: none"), std::string::npos);
}

TEST_F(CacheCli, BadUseIsAClearErrorAndNonZeroExit) {
  auto r = run_cli("cache", env_);
  EXPECT_NE(r.status, 0);
  r = run_cli("cache clear --l4", env_);
  EXPECT_NE(r.status, 0);
  r = run_cli("cache stats", "KILN_CACHE=sometimes");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("KILN_CACHE='sometimes' must be 'on' or 'off'"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace kiln
