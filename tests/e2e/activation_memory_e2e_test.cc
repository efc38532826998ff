// The activation-memory policy as a user sets it: full and selective
// recomputation give the losses of keeping everything, bit for bit, and
// full lowers the measured peak memory, in the graph trainer and in eager
// mode (debug mode: ops run one at a time, so the peak is the program's
// own, not how far the host ran ahead of the device queue). The expected
// peak is printed before the first step.
#include <gtest/gtest.h>

#include <filesystem>
#include <optional>

#include "tests/support/cli.h"
#include "tests/support/temp_dir.h"
#include "tests/support/train_run.h"

namespace kiln::test {
namespace {

namespace fs = std::filesystem;

struct TrainedRun {
  std::vector<double> losses;
  int64_t peak = 0;  // the largest mem_peak_bytes logged
};

class ActivationMemory : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    temp_.emplace();
    root_ = temp_->path();
    write_grammar_corpus((root_ / "corpus.txt").string());
  }
  static void TearDownTestSuite() { temp_.reset(); }

  static TrainedRun train(const std::string& name, const std::string& flags) {
    fs::path dump = root_ / name;
    // Four layers and a small vocabulary: block activations dominate memory.
    CliRun r = run_cli("train --config llama3_debug --model.n_layers 4 --data.path " +
                       (root_ / "corpus.txt").string() +
                       " --data.text_split line --job.dump_folder " + dump.string() +
                       " --training.steps 3 --training.seq_len 128 --training.local_batch_size 8"
                       " --metrics.log_freq 1 --metrics.enable_tensorboard false " +
                       flags);
    EXPECT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("expected peak memory: "), std::string::npos) << r.output;
    TrainedRun out;
    for (const auto& j : read_metrics(dump.string())) {
      out.losses.push_back(j["loss"].get<double>());
      out.peak = std::max(out.peak, j["mem_peak_bytes"].get<int64_t>());
    }
    EXPECT_EQ(out.losses.size(), 3u) << r.output;
    return out;
  }

  static void expect_policy_works(const std::string& name, const std::string& rung);

  static std::optional<TempDir> temp_;
  static fs::path root_;
};

std::optional<TempDir> ActivationMemory::temp_;
fs::path ActivationMemory::root_;

void ActivationMemory::expect_policy_works(const std::string& name, const std::string& rung) {
  TrainedRun none = train(name + "_none", rung + " --activation_checkpoint.mode none");
  TrainedRun full = train(name + "_full", rung + " --activation_checkpoint.mode full");
  TrainedRun selective =
      train(name + "_sel", rung + " --activation_checkpoint.mode selective");
  EXPECT_EQ(none.losses, full.losses) << rung;
  EXPECT_EQ(none.losses, selective.losses) << rung;
  EXPECT_LT(full.peak, none.peak) << rung;
  std::cout << rung << ": peak MiB none " << none.peak / 1048576.0 << ", selective "
            << selective.peak / 1048576.0 << ", full " << full.peak / 1048576.0 << "\n";
}

TEST_F(ActivationMemory, GraphTrainer) { expect_policy_works("graph", "--compile.graph_trainer"); }

TEST_F(ActivationMemory, Eager) { expect_policy_works("eager", "--runtime.eager_mode debug"); }

}  // namespace
}  // namespace kiln::test
