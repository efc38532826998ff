// Fault injection under mpirun: a SimpleFSDP run on 2 ranks (each writing
// its shard of every checkpoint, one checkpoint a step, in the background:
// their own group's collectives beside the training's) whose job is
// SIGKILLed again and again at random moments (mpirun's process group, as a
// terminal or scheduler kills it; the ranks must die with it) resumes each
// time from the newest complete sharded checkpoint and ends with the losses
// of an uninterrupted 2-rank run, bit for bit, every step.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "tests/support/temp_dir.h"
#include "tests/support/train_run.h"

namespace kiln::test {
namespace {

TEST(CheckpointKillMpi, RandomSigkillsOfTheWholeJobLoseNothing) {
  TempDir dir;
  write_grammar_corpus(dir / "corpus.txt");
  const int steps = 60;
  const char* mpiexec = std::getenv("KILN_MPIEXEC");
  ASSERT_NE(mpiexec, nullptr) << "ctest sets KILN_MPIEXEC";
  // A killed job leaves its session directory (megabytes of PMIx store) and
  // its ranks' shared-memory segments (in /dev/shm: memory) behind: they go
  // to the runs' temporary folder in `dir`.
  const std::string tmp = dir / "tmp/";
  expect_sigkills_lose_nothing(
      [&](const std::string& dump) {
        return debug_train_args(dir / "corpus.txt", dump, steps,
                                "--training.local_batch_size 2 --metrics.enable_tensorboard false "
                                "--checkpoint.enable --checkpoint.interval 1 "
                                "--checkpoint.keep_latest_k 3 --lr_scheduler.warmup_steps 2 "
                                "--checkpoint.async_mode async");
      },
      dir.path(), steps,
      std::string(mpiexec) + " --mca orte_tmpdir_base " + tmp + " --mca btl_vader_backing_directory " +
          tmp + " -n 2");
  const std::string last = "whole/checkpoint/step-" + std::to_string(steps);
  EXPECT_TRUE(std::filesystem::exists(dir / (last + "/model-00001-of-00002.safetensors")))
      << "the checkpoints are not sharded: this tests nothing of sharding";
}

}  // namespace
}  // namespace kiln::test
