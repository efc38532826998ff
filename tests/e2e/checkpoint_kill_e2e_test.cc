// Fault injection: a run SIGKILLed again and again at random moments, with
// a checkpoint after every step so that kills often land inside a checkpoint
// write, resumes each time from the newest complete checkpoint and ends
// with the losses of an uninterrupted run, bit for bit, every step (10 to
// 30 s). tests/dist/checkpoint_kill_dist_test.cc does the same under mpirun.
#include <gtest/gtest.h>

#include <chrono>

#include "kiln/train/checkpoint.h"
#include "tests/support/cli.h"
#include "tests/support/temp_dir.h"
#include "tests/support/train_run.h"

namespace kiln::test {
namespace {

TEST(CheckpointKill, RandomSigkillsDuringCheckpointWritesLoseNothing) {
  TempDir dir;
  write_grammar_corpus(dir / "corpus.txt");
  const int steps = 120;  // some 3 s a run
  auto args = [&](const std::string& dump) {
    return "train --config llama3_debug --data.path " + (dir / "corpus.txt") +
           " --data.text_split line --job.dump_folder " + dump + " --training.steps " +
           std::to_string(steps) +
           " --training.seq_len 32 --training.local_batch_size 4 --metrics.log_freq 1"
           " --checkpoint.enable --checkpoint.interval 1 --checkpoint.keep_latest_k 3"
           " --lr_scheduler.warmup_steps 2";
  };
  const auto t0 = std::chrono::steady_clock::now();
  CliRun whole = run_cli(args(dir / "whole"));
  ASSERT_EQ(whole.status, 0) << whole.output;
  const int64_t run_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::steady_clock::now() - t0)
                             .count();
  const std::vector<double> want = read_losses(dir / "whole");
  ASSERT_EQ(want.size(), size_t(steps));

  const std::string cut = dir / "cut";
  const int killed = kill_repeatedly(args(cut), cut, steps, run_ms, "", [&] {
    // Whatever the kill left, every checkpoint listed is whole.
    for (int64_t s : train::CheckpointManager(cut + "/checkpoint").steps())
      EXPECT_NO_THROW(train::CheckpointManager(cut + "/checkpoint").load(s)) << "step " << s;
  });
  EXPECT_GE(killed, 3) << "too few kills landed to test anything";
  CliRun last = run_cli(args(cut));
  ASSERT_EQ(last.status, 0) << last.output;
  EXPECT_EQ(read_losses(cut), want);
}

}  // namespace
}  // namespace kiln::test
