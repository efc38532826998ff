// Checkpoints saved and resumed by several ranks together
// (kiln/train/distributed_checkpoint.h), on 2 and 4 ranks: the ranks resume
// from one step or all fail, naming what each saw; a rank that cannot write
// its shards or read the checkpoint fails every rank at once, naming it and
// why.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "kiln/base/error.h"
#include "kiln/dist/mesh.h"
#include "kiln/dist/process_group.h"
#include "kiln/dist/world.h"
#include "kiln/runtime/tensor.h"
#include "kiln/train/distributed_checkpoint.h"
#include "tests/support/support.h"
#include "tests/support/temp_dir.h"

namespace kiln::train {
namespace {

using namespace std::chrono_literals;
using test::error_of;

// "world ranks 0, 2, 3" for every rank but rank 1.
std::string ranks_but_1() {
  const int n = dist::world()->size();
  std::string s = n > 2 ? "world ranks 0" : "world rank 0";
  for (int r = 2; r < n; ++r) s += ", " + std::to_string(r);
  return s;
}

TEST(DistributedCheckpoint, RanksThatSeeTheSameStepResumeFromIt) {
  auto g = checkpoint_group(*dist::world(), 60s);
  EXPECT_EQ(agree_on_resume_step(*g, 7, "ckpt"), 7);
  EXPECT_EQ(agree_on_resume_step(*g, std::nullopt, "ckpt"), std::nullopt);
}

TEST(DistributedCheckpoint, RanksThatSeeDifferentCheckpointsAllFailNamingWhatEachSaw) {
  auto g = checkpoint_group(*dist::world(), 60s);
  const bool odd_one = g->rank() == 1;
  const std::optional<int64_t> three = 3, five = 5;
  std::string m = error_of([&] { agree_on_resume_step(*g, odd_one ? three : five, "out/ckpt"); });
  EXPECT_NE(m.find("the ranks do not agree on the checkpoint to resume from in out/ckpt: " + ranks_but_1() +
                   ": step 5; world rank 1: step 3."),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("a file system that all hosts share"), std::string::npos) << m;
  m = error_of([&] { agree_on_resume_step(*g, odd_one ? std::nullopt : five, "out/ckpt"); });
  EXPECT_NE(m.find(": step 5; world rank 1: no checkpoint."), std::string::npos) << m;
}

CheckpointData small(int64_t step) {
  CheckpointData d;
  d.step = step;
  d.model = {{"w", full({2, 3}, 1.5)}};
  d.optimizer = {{"optim.m.w", zeros({2, 3})}};
  return d;
}

// Each rank reads a folder of its own here, as ranks on hosts with their own
// disks would; rank 1's lost a file.
TEST(DistributedCheckpoint, ARankThatCannotReadTheCheckpointFailsEveryRankNamingIt) {
  auto g = checkpoint_group(*dist::world(), 60s);
  test::TempDir dir;
  CheckpointManager m(dir / "ckpt");
  const std::string path = m.save(small(4));
  EXPECT_EQ(load_checkpoint_together(m, 4, *g).model.at("w").to_vector<float>(), std::vector<float>(6, 1.5f));
  if (g->rank() == 1) std::filesystem::remove(path + "/optimizer.safetensors");
  const std::string e = error_of([&] { load_checkpoint_together(m, 4, *g); });
  EXPECT_NE(e.find("reading checkpoint step 4 on group 'checkpoint'"), std::string::npos) << e;
  EXPECT_NE(e.find("failed: world rank 1: "), std::string::npos) << e;
  EXPECT_NE(e.find("optimizer.safetensors"), std::string::npos) << e;
  EXPECT_EQ(e.find("world rank 0"), std::string::npos) << e;
}

// Every rank saves into rank 0's folder (one file system, as a run needs);
// then rank 1's part of a save fails.
TEST(DistributedCheckpoint, ARankThatCannotWriteItsShardsFailsEveryRankNamingIt) {
  auto g = checkpoint_group(*dist::world(), 60s);
  dist::DeviceMesh mesh(dist::world(), dist::MeshDegrees{});
  test::TempDir dir;
  const std::string folder = dist::all_gather_text(*g, (dir / "ckpt"))[0];
  CheckpointManager m(folder);
  CheckpointData d = small(2);
  d.shard_index = g->rank();
  d.shard_count = g->size();
  const std::string path = save_checkpoint(m, d, mesh, *g);
  EXPECT_EQ(path.empty(), g->rank() != 0);
  EXPECT_EQ(m.steps(), std::vector<int64_t>{2});
  d.step = 3;
  if (g->rank() == 1) d.shard_count = 0;  // write_shard refuses it
  const std::string e = error_of([&] { save_checkpoint(m, d, mesh, *g); });
  EXPECT_NE(e.find("writing checkpoint step 3 on group 'checkpoint'"), std::string::npos) << e;
  EXPECT_NE(e.find("failed: world rank 1: checkpoint: shard 1 of 0"), std::string::npos) << e;
  EXPECT_EQ(m.steps(), std::vector<int64_t>{2});  // nothing published
  g->barrier().wait();  // rank 0's folder outlives the others' reads
}

}  // namespace
}  // namespace kiln::train
