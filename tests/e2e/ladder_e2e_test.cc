// The execution ladder as a user runs it: the same recipe for 20 steps under
// strict eager, defer_and_fuse, per-block compile and the graph trainer
// (whole, and split into forward and backward programs, per layer too),
// with the layers as a scan (eager and in the graph trainer), with its
// program built in the background, and with activations offloaded, gives
// bit-identical losses and gradient norms for every model family
// (deterministic kernels; the rungs run the same step function, and the
// compiler's passes keep bits). With the other registered implementations
// of the components switched on (flash attention, fused linear
// cross-entropy, grouped MoE matmul, ...: taken from the registries, so a
// new one is covered too) the rungs still agree with each other bit for
// bit; against the recipe's own they differ in rounding only (tolerance
// below).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <optional>

#include "kiln/models/model_fields.h"
#include "kiln/train/config.h"
#include "tests/support/cli.h"
#include "tests/support/ladder.h"
#include "tests/support/temp_dir.h"
#include "tests/support/train_run.h"

namespace kiln::test {
namespace {

namespace fs = std::filesystem;

class Ladder : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() {
    temp_.emplace();
    root_ = temp_->path();
    write_grammar_corpus((root_ / "corpus.txt").string());
  }
  static void TearDownTestSuite() { temp_.reset(); }

  static Curve train(const std::string& recipe, const std::string& name, const std::string& flags,
                     const std::string& execution) {
    return train_curve(root_, recipe, name, flags, execution);
  }

  static std::optional<TempDir> temp_;
  static fs::path root_;
};

std::optional<TempDir> Ladder::temp_;
fs::path Ladder::root_;

const std::vector<Rung>& kRungs = ladder_rungs();

// Rounds of --override flags that together switch on every registered
// implementation other than `recipe`'s: round i takes each component's i-th
// alternative, where it has one.
std::vector<std::string> alternative_rounds(const std::string& recipe) {
  train::TrainCommandLine cl;
  cl.config = recipe;
  const ModelConfig base = train::resolve_model_config(train::load_train_config(cl));
  std::vector<std::string> rounds;
  for (const ModelField& f : model_fields()) {
    if (!f.registry) continue;
    size_t i = 0;
    for (const std::string& impl : f.registry->names()) {
      if (impl == base.*std::get<std::string ModelConfig::*>(f.member)) continue;
      if (i == rounds.size()) rounds.emplace_back();
      rounds[i++] += " --override " + f.registry->component() + "=" + impl;
    }
  }
  return rounds;
}

TEST_P(Ladder, EveryRungGivesTheSameBits) {
  const std::string recipe = GetParam();
  auto train_rung = [&](const Rung& rung, const std::string& name, const std::string& extra) {
    return train(recipe, name, rung.flags + extra, rung.execution);
  };
  Curve reference = train_rung(kRungs[0], "strict", "");
  for (size_t i = 1; i < kRungs.size(); ++i)
    expect_identical(reference, train_rung(kRungs[i], kRungs[i].name, ""),
                     kRungs[i].name + " vs strict");
  EXPECT_LT(reference.loss.back(), reference.loss.front()) << "the loss should fall";

  // The other implementations: the same kernels on every rung, so again
  // bit-identical; against the recipe's they change rounding only. After 20
  // AdamW steps f32 rounding differences (~1e-7 relative per op) stay well
  // below 1e-3 relative in the loss.
  std::vector<std::string> rounds = alternative_rounds(recipe);
  for (size_t i = 0; i < rounds.size(); ++i) {
    SCOPED_TRACE(rounds[i]);
    const std::string name = "alternatives" + std::to_string(i);
    Curve alt = train_rung(kRungs[0], name + "_strict", rounds[i]);
    expect_identical(alt, train_rung(kRungs[3], name + "_graph", rounds[i]),
                     "other implementations, graph trainer vs strict");
    for (size_t s = 0; s < alt.loss.size(); ++s)
      EXPECT_NEAR(alt.loss[s], reference.loss[s], 1e-3 * reference.loss[s]) << "step " << s + 1;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, Ladder,
                         ::testing::Values("llama3_debug", "qwen3_debug", "qwen3_moe_debug"));

TEST(LadderAccumulation, GraphTrainerMatchesStrictWithMicrobatches) {
  fs::path root = fs::temp_directory_path() / ("kiln_ladder_accum_" + std::to_string(::getpid()));
  fs::create_directories(root);
  write_grammar_corpus((root / "corpus.txt").string());
  auto run = [&](const Rung& rung) {
    const std::string& name = rung.name;
    fs::path dump = root / name;
    CliRun r = run_cli("train --config llama3_debug --data.path " + (root / "corpus.txt").string() +
                       " --data.text_split line --job.dump_folder " + dump.string() +
                       " --training.steps 6 --training.seq_len 32 --training.local_batch_size 2"
                       " --training.global_batch_size 6 --metrics.log_freq 1 " +
                       rung.flags);
    EXPECT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("\nexecution: " + rung.execution), std::string::npos) << r.output;
    return read_losses(dump.string());
  };
  std::vector<double> strict = run(kRungs[0]), graph = run(kRungs[3]), split = run(kRungs[7]);
  EXPECT_EQ(strict.size(), 6u);
  EXPECT_EQ(strict, graph);
  EXPECT_EQ(strict, split);
  fs::remove_all(root);
}

}  // namespace
}  // namespace kiln::test
