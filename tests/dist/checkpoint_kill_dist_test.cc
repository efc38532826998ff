// Fault injection under mpirun: a SimpleFSDP run on 2 ranks (each writing
// its shard of every checkpoint, one checkpoint a step) whose whole job,
// mpirun and ranks, is SIGKILLed again and again at random moments resumes
// each time from the newest complete sharded checkpoint and ends with the
// losses of an uninterrupted 2-rank run, bit for bit, every step.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>

#include "kiln/train/checkpoint.h"
#include "tests/support/cli.h"
#include "tests/support/temp_dir.h"
#include "tests/support/train_run.h"

namespace kiln::test {
namespace {

TEST(CheckpointKillMpi, RandomSigkillsOfTheWholeJobLoseNothing) {
  TempDir dir;
  write_grammar_corpus(dir / "corpus.txt");
  const int steps = 60;
  auto args = [&](const std::string& dump) {
    return "train --config llama3_debug --data.path " + (dir / "corpus.txt") +
           " --data.text_split line --job.dump_folder " + dump + " --training.steps " +
           std::to_string(steps) +
           " --training.seq_len 32 --training.local_batch_size 2 --metrics.log_freq 1"
           " --metrics.enable_tensorboard false --checkpoint.enable --checkpoint.interval 1"
           " --checkpoint.keep_latest_k 3 --lr_scheduler.warmup_steps 2";
  };
  const char* mpiexec = std::getenv("KILN_MPIEXEC");
  ASSERT_NE(mpiexec, nullptr) << "ctest sets KILN_MPIEXEC";
  const std::string launcher = std::string(mpiexec) + " -n 2";
  const auto t0 = std::chrono::steady_clock::now();
  CliRun whole = run_cli(args(dir / "whole"), launcher);
  ASSERT_EQ(whole.status, 0) << whole.output;
  const int64_t run_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::steady_clock::now() - t0)
                             .count();
  const std::vector<double> want = read_losses(dir / "whole");
  ASSERT_EQ(want.size(), size_t(steps));
  ASSERT_TRUE(std::filesystem::exists(dir / ("whole/checkpoint/step-" + std::to_string(steps) + "/model-00001-of-00002.safetensors")))
      << "the checkpoints are not sharded: this tests nothing of sharding";

  const std::string cut = dir / "cut";
  const int killed = kill_repeatedly(args(cut), cut, steps, run_ms, launcher, [&] {
    for (int64_t s : train::CheckpointManager(cut + "/checkpoint").steps())
      EXPECT_NO_THROW(train::CheckpointManager(cut + "/checkpoint").load(s)) << "step " << s;
  });
  EXPECT_GE(killed, 3) << "too few kills landed to test anything";
  CliRun last = run_cli(args(cut), launcher);
  ASSERT_EQ(last.status, 0) << last.output;
  EXPECT_EQ(read_losses(cut), want);
}

}  // namespace
}  // namespace kiln::test
