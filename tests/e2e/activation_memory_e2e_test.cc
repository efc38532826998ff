// The activation-memory policy as a user sets it: full and selective
// recomputation and offload give the losses of keeping everything, bit for
// bit, and full and offload lower the measured peak of device memory, in
// the graph trainer and in eager mode (debug mode: ops run one at a time,
// so the peak is the program's own, not how far the host ran ahead of the
// device queue); offload also on the rungs between. The expected peak is
// printed before the first step, with what offload keeps in host memory, and
// strict eager, running ahead of the device queue, measures that peak.
#include <gtest/gtest.h>

#include <cstdio>
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
  int64_t peak = 0;          // the largest mem_peak_bytes logged
  int64_t offload_peak = 0;  // the largest mem_offload_peak_bytes logged
  std::string output;
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
    out.output = r.output;
    for (const auto& j : read_metrics(dump.string())) {
      out.losses.push_back(j["loss"].get<double>());
      out.peak = std::max(out.peak, j["mem_peak_bytes"].get<int64_t>());
      if (j.contains("mem_offload_peak_bytes"))
        out.offload_peak = std::max(out.offload_peak, j["mem_offload_peak_bytes"].get<int64_t>());
    }
    EXPECT_EQ(out.losses.size(), 3u) << r.output;
    return out;
  }

  static void expect_policy_works(const std::string& name, const std::string& rung);
  static void expect_offload_works(const std::string& name, const std::string& rung,
                                   const TrainedRun& none);

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
  expect_offload_works(name, rung, none);
}

// Offload against none: the same losses, and a device peak lower by at
// least 40% of what the offload pool held (four layers: the backward holds
// about two layers' activations at a time, so half at best).
void ActivationMemory::expect_offload_works(const std::string& name, const std::string& rung,
                                            const TrainedRun& none) {
  TrainedRun off = train(name + "_offload", rung + " --activation_checkpoint.mode offload");
  EXPECT_EQ(none.losses, off.losses) << rung;
  EXPECT_EQ(none.offload_peak, 0) << rung;
  EXPECT_GT(off.offload_peak, 0) << rung;
  EXPECT_GE(10 * (none.peak - off.peak), 4 * off.offload_peak) << rung;
  EXPECT_NE(off.output.find("of offloaded activations in host memory"), std::string::npos)
      << off.output;
  std::cout << rung << ": device peak MiB none " << none.peak / 1048576.0 << ", offload "
            << off.peak / 1048576.0 << " (+ " << off.offload_peak / 1048576.0
            << " MiB in the offload pool)\n";
}

TEST_F(ActivationMemory, GraphTrainer) { expect_policy_works("graph", "--compile.graph_trainer"); }

TEST_F(ActivationMemory, Eager) { expect_policy_works("eager", "--runtime.eager_mode debug"); }

// A size the run printed before step 1, right after `before`, in bytes (to
// its 0.1 MiB).
double printed_mib(const std::string& output, const std::string& before) {
  const size_t at = output.find(before);
  double value = 0;
  char unit[4] = {};
  if (at == std::string::npos ||
      std::sscanf(output.c_str() + at + before.size(), "%lf %3s", &value, unit) != 2 ||
      std::string(unit) != "MiB") {
    ADD_FAILURE() << "no size in MiB after '" << before << "' in:\n" << output;
    return 0;
  }
  return value * 1048576.0;
}

double printed_expected_peak(const std::string& output) {
  return printed_mib(output, "expected peak memory: ");
}

// The peak measured is the one printed: the memory plan's, with the
// kernels' scratch (the fused loss's logits tiles) and the graph trainer's
// arena in the allocator's size class, a scan's carries and its body's
// arena beside it, under per-block compile with compile.replay the buffers
// the block programs' recordings keep, and under defer_and_fuse its
// regions, each a program holding its inputs and values until it ends.
// Strict eager runs ahead of the device queue, whose tasks hold their
// buffers until they run, by a bounded amount.
TEST_F(ActivationMemory, TheMeasuredPeakIsTheExpectedOne) {
  for (std::string rung : {"--runtime.eager_mode strict", "--compile.graph_trainer",
                           "--compile.graph_trainer --compile.scan_layers",
                           "--compile.enable --compile.graph_trainer=false --compile.replay",
                           "--runtime.eager_mode defer_and_fuse",
                           "--runtime.eager_mode defer_and_fuse --compile.enable --compile.graph_trainer=false"})
    for (std::string loss : {"composite", "fused_ce"}) {
      TrainedRun run = train("expected_" + std::to_string(rung.size()) + "_" + loss,
                             rung + " --override loss=" + loss + " --activation_checkpoint.mode none");
      const double expected = printed_expected_peak(run.output);
      EXPECT_NEAR(double(run.peak), expected, 0.05 * expected) << rung << " " << loss;
      std::cout << rung << ", loss " << loss << ": expected peak MiB " << expected / 1048576.0
                << ", measured " << run.peak / 1048576.0 << "\n";
    }
}

// The graph trainer's step split per layer and replayed: each segment's
// recordings keep their own buffers, and the values passed between the
// segments are taken anew each step; the printed peak counts both. The
// fused loss's scratch inside a recording comes from the recording's private
// pool, which the measured peak counts as the device's memory in use.
TEST_F(ActivationMemory, ReplayedGraphSplitPeaksAsPrinted) {
  for (std::string loss : {"composite", "fused_ce"}) {
    TrainedRun run = train("split_replay_" + loss, "--compile.graph_trainer --compile.graph_split"
                                                   " --compile.graph_split_layers 1 --compile.replay"
                                                   " --model.loss_impl " + loss);
    const double expected = printed_expected_peak(run.output);
    EXPECT_NEAR(double(run.peak), expected, 0.05 * expected) << loss << "\n" << run.output;
    EXPECT_NE(run.output.find("kept by the programs' recordings (compile.replay)"), std::string::npos)
        << run.output;
    std::cout << "graph split, replayed, " << loss << " loss: expected peak MiB " << expected / 1048576.0
              << ", measured " << run.peak / 1048576.0 << "\n";
  }
}

// The offload pool holds at its peak what was printed, to the printed
// 0.1 MiB: each offloaded activation a block of its own in eager mode (one
// op at a time), under defer_and_fuse the offloaded values its regions pass
// on (a region's outputs that its program merged into one value copied
// apart in the offload pool), the offload arena in the graph trainer.
TEST_F(ActivationMemory, TheOffloadPoolHoldsWhatWasPrinted) {
  for (std::string rung : {"--runtime.eager_mode debug", "--runtime.eager_mode defer_and_fuse",
                           "--compile.graph_trainer"}) {
    TrainedRun run = train("offload_expected_" + std::to_string(rung.size()),
                           rung + " --activation_checkpoint.mode offload");
    const double printed = printed_mib(run.output, "), and ");
    EXPECT_NEAR(double(run.offload_peak), printed, 0.05 * 1048576.0) << rung << "\n" << run.output;
    std::cout << rung << ": offload pool MiB printed " << printed / 1048576.0 << ", measured "
              << run.offload_peak / 1048576.0 << "\n";
  }
}

TEST_F(ActivationMemory, OffloadPerBlockCompile) {
  const std::string rung = "--runtime.eager_mode debug --compile.enable --compile.graph_trainer=false";
  expect_offload_works("per_block", rung, train("per_block_none", rung + " --activation_checkpoint.mode none"));
}

TEST_F(ActivationMemory, OffloadDeferAndFuse) {
  const std::string rung = "--runtime.eager_mode defer_and_fuse --compile.graph_trainer=false";
  TrainedRun none = train("deferred_none", rung + " --activation_checkpoint.mode none");
  TrainedRun off = train("deferred_offload", rung + " --activation_checkpoint.mode offload");
  EXPECT_EQ(none.losses, off.losses);
  EXPECT_GT(off.offload_peak, 0);
}

// Under scan the saved activations are the scan's per-layer carries (one
// [batch, seq, dim] per layer, as full checkpointing keeps): they move to the
// offload pool, with the same losses. They are small next to this model's
// peak, so the peak is only checked not to rise.
TEST_F(ActivationMemory, OffloadUnderScan) {
  const std::string rung = "--compile.graph_trainer --compile.scan_layers";
  TrainedRun none = train("scan_none", rung + " --activation_checkpoint.mode none");
  TrainedRun off = train("scan_offload", rung + " --activation_checkpoint.mode offload");
  EXPECT_EQ(none.losses, off.losses);
  EXPECT_GE(off.offload_peak, 4 * 8 * 128 * 64 * 4) << "4 layers' f32 [8, 128, 64] carries";
  EXPECT_LE(off.peak, none.peak);
}

}  // namespace
}  // namespace kiln::test
