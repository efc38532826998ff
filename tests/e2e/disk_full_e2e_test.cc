// Fault injection: the disk fills up at each stage of a run's checkpoint
// writes (a size-limited tmpfs, mounted in a user and mount namespace of its
// own, so no root is needed where user namespaces are allowed). Each time
// the run must stop with an error naming the file and the full disk, leave
// only whole checkpoints, and, once there is room again, resume to the
// losses of an uninterrupted run, bit for bit (some 15 s).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "kiln/train/checkpoint.h"
#include "tests/support/cli.h"
#include "tests/support/temp_dir.h"
#include "tests/support/train_run.h"

namespace kiln::test {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kPage = 4096;  // tmpfs counts whole pages

uint64_t pages(const fs::path& file) { return (fs::file_size(file) + kPage - 1) / kPage; }

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs `sh -c script` in a user + mount namespace of its own; its exit status.
int in_namespace(const std::string& script) {
  std::string quoted;
  for (char c : script) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  int status = std::system(("unshare -rm sh -c '" + quoted + "' 2>&1").c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void expect_full_disks_lose_nothing(const std::string& async_mode) {
  TempDir dir;
  const std::string mnt = dir / "mnt/";
  if (in_namespace("mount -t tmpfs -o size=64k tmpfs " + mnt) != 0)
    GTEST_SKIP() << "cannot mount a tmpfs in a user namespace here (unshare -rm)";
  write_grammar_corpus(dir / "corpus.txt");
  const int steps = 6;
  auto args = [&](const std::string& dump) {
    return debug_train_args(dir / "corpus.txt", dump, steps,
                            "--training.local_batch_size 4 --checkpoint.enable "
                            "--checkpoint.interval 2 --checkpoint.keep_latest_k 0 "
                            "--lr_scheduler.warmup_steps 2 --checkpoint.async_mode " +
                                async_mode);
  };
  const std::string whole = dir / "whole";
  CliRun w = run_cli(args(whole));
  ASSERT_EQ(w.status, 0) << w.output;
  const std::vector<double> want = read_losses(whole);
  ASSERT_EQ(want.size(), size_t(steps));

  // What the run writes before its first checkpoint (config, tokenizer,
  // metrics, event file: some pages), and the pages of one checkpoint's files.
  uint64_t before = 0;
  for (const auto& e : fs::recursive_directory_iterator(whole))
    if (e.is_regular_file() && e.path().string().find("/checkpoint/") == std::string::npos)
      before += pages(e.path());
  const fs::path step2 = fs::path(whole) / "checkpoint" / "step-2";
  const uint64_t model = pages(step2 / "model.safetensors");
  const uint64_t optim = pages(step2 / "optimizer.safetensors");
  const uint64_t manifest = pages(step2 / "manifest.json");
  const uint64_t one = model + optim + manifest;
  // Disk sizes (pages) that fill up before the first checkpoint, inside
  // each file of the first one, in the manifest of the second, and inside
  // the last checkpoint.
  const std::vector<uint64_t> sizes = {before / 2,
                                       before + model / 2,
                                       before + model + optim / 2,
                                       before + model + optim + manifest - 1,
                                       before + model + optim,
                                       before + one + model + optim + manifest - 1,
                                       before + 2 * one + model / 2};
  std::set<std::string> stages;  // the checkpoint files a full disk stopped
  for (uint64_t size : sizes) {
    SCOPED_TRACE("disk of " + std::to_string(size) + " pages");
    const std::string out = dir / ("after-" + std::to_string(size));
    const std::string log = out + ".log";
    const char* cli = std::getenv("KILN_CLI");
    ASSERT_NE(cli, nullptr);
    // The run on the small disk, then its dump folder copied out (the tmpfs
    // goes with the namespace).
    const int rc = in_namespace("mount -t tmpfs -o size=" + std::to_string(size * kPage) +
                                " tmpfs " + mnt + " && { " + cli + " " + args(mnt + "run") +
                                " > " + log + " 2>&1; echo $? > " + out + ".rc; cp -a " + mnt +
                                "run " + out + "; }");
    ASSERT_EQ(rc, 0) << "the namespace script failed";
    const std::string output = read_text(log);
    const int status = std::stoi(read_text(out + ".rc"));
    ASSERT_LT(status, 128) << "killed by a signal:\n" << output;
    ASSERT_NE(status, 0) << "the run fit on a disk it should not:\n" << output;
    EXPECT_NE(output.find("No space left on device"), std::string::npos) << output;
    EXPECT_EQ(output.find("terminate called"), std::string::npos) << output;
    for (const char* file : {"model.safetensors", "optimizer.safetensors", "manifest.json"})
      if (output.find(file) != std::string::npos) stages.insert(file);
    // Only whole checkpoints, and no temporary directories left behind.
    const std::string folder = out + "/checkpoint";
    if (fs::exists(folder)) {
      for (int64_t s : train::CheckpointManager(folder).steps())
        EXPECT_NO_THROW(train::CheckpointManager(folder).load(s)) << "step " << s;
      for (const auto& e : fs::directory_iterator(folder))
        EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
    }
    // With room again, the run resumes and ends as the uninterrupted one did.
    CliRun resumed = run_cli(args(out));
    ASSERT_EQ(resumed.status, 0) << resumed.output;
    EXPECT_EQ(read_losses(out), want) << resumed.output;
  }
  EXPECT_EQ(stages.size(), 3u) << "a full disk did not stop each checkpoint file's write";
}

TEST(DiskFull, AtEachStageOfACheckpointWriteIsAClearErrorThatLosesNothing) {
  expect_full_disks_lose_nothing("disabled");
}

// The error comes from the save's thread, a step or more later.
TEST(DiskFull, AtEachStageOfABackgroundCheckpointWriteIsAClearErrorThatLosesNothing) {
  expect_full_disks_lose_nothing("async");
}

}  // namespace
}  // namespace kiln::test
