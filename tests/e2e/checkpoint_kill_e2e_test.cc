// Fault injection: a run SIGKILLed again and again at random moments, with
// a checkpoint after every step so that kills often land inside a checkpoint
// write, resumes each time from the newest complete checkpoint and ends
// with the losses of an uninterrupted run, bit for bit, every step (10 to
// 30 s), with checkpoints written at once or in the background.
// tests/dist/checkpoint_kill_dist_test.cc does the same under mpirun.
#include <gtest/gtest.h>

#include "tests/support/temp_dir.h"
#include "tests/support/train_run.h"

namespace kiln::test {
namespace {

void expect_kills_lose_nothing(const std::string& async_mode) {
  TempDir dir;
  write_grammar_corpus(dir / "corpus.txt");
  const int steps = 120;  // some 3 s a run
  expect_sigkills_lose_nothing(
      [&](const std::string& dump) {
        return debug_train_args(dir / "corpus.txt", dump, steps,
                                "--training.local_batch_size 4 --checkpoint.enable "
                                "--checkpoint.interval 1 --checkpoint.keep_latest_k 3 "
                                "--lr_scheduler.warmup_steps 2 --checkpoint.async_mode " +
                                    async_mode);
      },
      dir.path(), steps);
}

TEST(CheckpointKill, RandomSigkillsDuringCheckpointWritesLoseNothing) {
  expect_kills_lose_nothing("disabled");
}

// The writes run on a thread while the next steps train: kills land in them
// and in the steps beside them.
TEST(CheckpointKill, RandomSigkillsDuringBackgroundCheckpointWritesLoseNothing) {
  expect_kills_lose_nothing("async");
}

}  // namespace
}  // namespace kiln::test
