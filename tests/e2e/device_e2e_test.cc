// `kiln train --training.device` on a device other than the default, with
// no GPU: KILN_CPU_DEVICES=2 gives a second host device, cpu:1, and an op
// whose inputs sit on two devices is an error. So a run on cpu:1 that
// gives cpu:0's bits shows that the parameters, optimizer state, batches,
// constants and every step's values were placed on the device asked for
// (the GPU suite, tests/backend/cuda/train_cuda_test.cc, runs the same
// ladder on CUDA). A checkpoint saved on one device resumes on another,
// `kiln eval` and `kiln generate --device` give the CPU's results there, and
// a device that does not exist is a clear error.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <optional>

#include "kiln/runtime/backend.h"
#include "tests/support/cli.h"
#include "tests/support/ladder.h"
#include "tests/support/temp_dir.h"
#include "tests/support/train_run.h"

namespace kiln::test {
namespace {

namespace fs = std::filesystem;

const char* kTwoHostDevices = "KILN_CPU_DEVICES=2";

class DeviceRuns : public ::testing::TestWithParam<std::string> {
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

std::optional<TempDir> DeviceRuns::temp_;
fs::path DeviceRuns::root_;

TEST_P(DeviceRuns, RungsOnASecondHostDeviceGiveTheFirstsBits) {
  std::vector<Rung> rungs;
  for (const char* name : {"strict", "defer_and_fuse", "per_block_compile", "graph_trainer",
                           "scan_graph_trainer_offload"})
    rungs.push_back(ladder_rung(name));
  expect_device_ladder(root_, GetParam(), "cpu:1", kTwoHostDevices, rungs, 0);
}

INSTANTIATE_TEST_SUITE_P(Families, DeviceRuns,
                         ::testing::Values("llama3_debug", "qwen3_debug", "qwen3_moe_debug"));

// A run on cpu:1 stopped (SIGTERM saves a checkpoint of host tensors) and
// resumed on cpu:0 equals an uninterrupted run bit for bit; validation runs
// on the device too.
TEST_F(DeviceRuns, ACheckpointResumesOnAnotherDevice) {
  auto args = [&](const std::string& dump, const std::string& device) {
    return debug_train_args((root_ / "corpus.txt").string(), (root_ / dump).string(), 20,
                            "--checkpoint.enable --validation.enable --validation.freq 10"
                            " --data.val_fraction 0.05 --validation.steps 2 --training.device " +
                                device);
  };
  CliRun whole = run_cli(args("whole", "cpu"));
  ASSERT_EQ(whole.status, 0) << whole.output;
  const fs::path moved = root_ / "moved";
  const int stopped = run_cli_until(
      args("moved", "cpu:1"), (root_ / "moved.log").string(),
      [&] { return last_logged_step(moved.string()) >= 5; }, SIGTERM,
      std::string("env ") + kTwoHostDevices);
  ASSERT_NE(stopped, 0) << "the run should have been stopped";
  ASSERT_LT(last_logged_step(moved.string()), 20);
  CliRun rest = run_cli(args("moved", "cpu"));
  ASSERT_EQ(rest.status, 0) << rest.output;
  EXPECT_NE(rest.output.find("resumed from"), std::string::npos) << rest.output;
  Curve want = read_curve((root_ / "whole").string()), got = read_curve(moved.string());
  EXPECT_EQ(got.loss, want.loss);
  EXPECT_EQ(got.val_loss, want.val_loss);
  EXPECT_EQ(want.val_loss.size(), 2u);
}

// A trained checkpoint evaluated and continued on cpu:1: the loss and the
// greedy text of cpu:0 (every batch, mask and cache on the device).
TEST_F(DeviceRuns, EvalAndGenerateRunOnTheDeviceAskedFor) {
  const std::string corpus = (root_ / "corpus.txt").string(), dump = (root_ / "served").string();
  CliRun trained = run_cli(debug_train_args(corpus, dump, 4, "--checkpoint.enable"));
  ASSERT_EQ(trained.status, 0) << trained.output;
  auto both = [&](const std::string& command) {
    CliRun host = run_cli(command), device = run_cli(command + " --device cpu:1", kTwoHostDevices);
    EXPECT_EQ(host.status, 0) << host.output;
    EXPECT_EQ(device.status, 0) << device.output;
    return std::pair{host.output, device.output};
  };
  auto [eval_cpu, eval_dev] = both("eval --checkpoint " + dump + " --data " + corpus + " --json");
  const auto loss_of = [](const std::string& out) { return out.substr(out.find("\"loss\"")); };
  EXPECT_EQ(loss_of(eval_dev).substr(0, 30), loss_of(eval_cpu).substr(0, 30)) << eval_dev;
  auto [gen_cpu, gen_dev] = both("generate --checkpoint " + dump +
                                 " --prompt 'the' --max-new-tokens 12 --temperature 0");
  EXPECT_EQ(gen_dev, gen_cpu);
  CliRun missing = run_cli("eval --checkpoint " + dump + " --data " + corpus + " --device cpu:2",
                           kTwoHostDevices);
  EXPECT_NE(missing.status, 0);
  EXPECT_NE(missing.output.find("--device cpu:2: device 'cpu:2' does not exist"), std::string::npos)
      << missing.output;
}

TEST_F(DeviceRuns, ADeviceThatDoesNotExistIsAClearError) {
  auto train = [&](const std::string& device, const std::string& env) {
    return run_cli(debug_train_args((root_ / "corpus.txt").string(), (root_ / "bad").string(), 2,
                                    "--training.device " + device),
                   env);
  };
  struct Case {
    std::string device, env, message;
  };
  std::vector<Case> cases = {
      {"cpu:2", kTwoHostDevices,
       "training.device = cpu:2: device 'cpu:2' does not exist: 2 found, numbered from 0"},
      {"cpu:1", "", "KILN_CPU_DEVICES=N makes N host devices"},
      {"tpu", "", "config: training.device: unknown device 'tpu': use cpu, cuda or cuda:N"},
      {"cuda:x", "", "bad device index in 'cuda:x'"},
      {"cpu", "KILN_CPU_DEVICES=0", "KILN_CPU_DEVICES='0' must be a whole number from 1 to 64"},
  };
  Backend* cuda = find_backend(DeviceKind::cuda);
  if (!cuda)
    cases.push_back({"cuda", "", "training.device = cuda: device 'cuda:0' is not available: this "
                                 "kiln was built without its backend"});
  else if (cuda->device_count() == 0)
    cases.push_back({"cuda", "", "training.device = cuda: device 'cuda:0' does not exist: this "
                                 "machine has none"});
  for (const Case& c : cases) {
    CliRun r = train(c.device, c.env);
    EXPECT_NE(r.status, 0) << c.device << ": " << r.output;
    EXPECT_NE(r.output.find(c.message), std::string::npos) << c.device << ": " << r.output;
    EXPECT_EQ(r.output.find("Aborted"), std::string::npos) << r.output;
  }
}

}  // namespace
}  // namespace kiln::test
