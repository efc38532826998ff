// `kiln train --training.device cuda` as a user runs it, for the three model
// families: every rung of the ladder gives the same bits on the GPU, the
// GPU's f32 losses and gradient norms follow the CPU's within 1e-4 relative
// over 20 steps (cuBLAS and oneDNN sum in other orders), activation offload
// keeps the bits and lowers the device's peak, and bf16 mixed precision
// trains. The same ladder runs on a second host device in
// tests/e2e/device_e2e_test.cc, bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "tests/support/ladder.h"
#include "tests/support/temp_dir.h"
#include "tests/support/train_run.h"

namespace kiln::test {
namespace {

namespace fs = std::filesystem;

class TrainCuda : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() {
    temp_.emplace();
    root_ = temp_->path();
    write_grammar_corpus((root_ / "corpus.txt").string());
  }
  static void TearDownTestSuite() { temp_.reset(); }

  static std::optional<TempDir> temp_;
  static fs::path root_;
};

std::optional<TempDir> TrainCuda::temp_;
fs::path TrainCuda::root_;

int64_t max_of(const std::vector<int64_t>& v) {
  return v.empty() ? 0 : *std::max_element(v.begin(), v.end());
}

TEST_P(TrainCuda, EveryRungGivesTheSameBitsAndFollowsTheCpu) {
  const std::string recipe = GetParam();
  expect_device_ladder(root_, recipe, "cuda", "", ladder_rungs(), 1e-4);
  // The ladder's runs: offload on and off.
  Curve kept = read_curve((root_ / (recipe + "_cuda_graph_trainer")).string());
  Curve offloaded = read_curve((root_ / (recipe + "_cuda_graph_trainer_offload")).string());
  EXPECT_LT(max_of(offloaded.mem_peak), max_of(kept.mem_peak))
      << "offload should lower the GPU's peak";
}

// bf16 compute with f32 masters: the GPU's tensor cores and the CPU's bf16
// GEMMs round differently, so the curves agree loosely; the loss falls.
TEST_P(TrainCuda, Bf16MixedPrecisionTrains) {
  const std::string recipe = GetParam();
  const Rung& graph = ladder_rung("graph_trainer");
  const std::string bf16 = graph.flags + " --training.mixed_precision_param bfloat16";
  Curve cpu = train_curve(root_, recipe, "bf16_cpu", bf16, graph.execution);
  Curve gpu = train_curve(root_, recipe, "bf16_cuda", bf16 + " --training.device cuda",
                          graph.execution);
  ASSERT_EQ(gpu.loss.size(), cpu.loss.size());
  for (size_t s = 0; s < cpu.loss.size(); ++s)
    EXPECT_NEAR(gpu.loss[s], cpu.loss[s], 2e-2 * cpu.loss[s]) << "step " << s + 1;
  EXPECT_LT(gpu.loss.back(), gpu.loss.front());
}

INSTANTIATE_TEST_SUITE_P(Families, TrainCuda,
                         ::testing::Values("llama3_debug", "qwen3_debug", "qwen3_moe_debug"));

}  // namespace
}  // namespace kiln::test
