#include "kiln/train/distributed_checkpoint.h"

#include <algorithm>
#include <functional>

#include "kiln/base/error.h"
#include "kiln/dist/joint_setup.h"

namespace kiln::train {
namespace {

// Rank 0's text, on every rank.
std::string broadcast_text(dist::ProcessGroup& g, const std::string& text) {
  int64_t size = int64_t(text.size());
  g.broadcast(&size, 1, DType::i64, 0).wait();
  std::string out = text;
  out.resize(size_t(size));
  g.broadcast(out.data(), size, DType::b8, 0).wait();  // b8: one byte each, moved as is
  return out;
}

// Every rank's digest, in rank order.
std::vector<ShardDigest> all_digests(dist::ProcessGroup& g, const ShardDigest& mine) {
  constexpr int64_t kWords = 5;
  const int64_t words[kWords] = {mine.index, int64_t(mine.model_bytes), int64_t(mine.model_hash),
                                 int64_t(mine.optimizer_bytes), int64_t(mine.optimizer_hash)};
  std::vector<int64_t> all(size_t(kWords * g.size()));
  g.all_gather(words, all.data(), kWords, DType::i64).wait();
  std::vector<ShardDigest> out;
  for (auto w = all.begin(); w != all.end(); w += kWords)
    out.push_back({w[0], uint64_t(w[1]), uint64_t(w[2]), uint64_t(w[3]), uint64_t(w[4])});
  return out;
}

}  // namespace

// Replicas (and the ranks of a tp group, which save gathered tensors) hold
// equal shards: the first one writes them.
bool writes_checkpoint_shards(const dist::DeviceMesh& mesh) {
  return mesh.coordinate("dp_replicate") == 0 && mesh.coordinate("tp") == 0;
}

std::shared_ptr<dist::ProcessGroup> checkpoint_group(dist::ProcessGroup& world,
                                                     std::chrono::milliseconds timeout) {
  std::shared_ptr<dist::ProcessGroup> g = world.split(0, world.rank(), "checkpoint");
  g->set_timeout(timeout, "--checkpoint.timeout_seconds");
  return g;
}

std::optional<int64_t> agree_on_resume_step(dist::ProcessGroup& group, std::optional<int64_t> mine,
                                            const std::string& folder) {
  const std::vector<std::string> seen =
      dist::all_gather_text(group, mine ? cat("step ", *mine) : std::string("no checkpoint"));
  if (std::adjacent_find(seen.begin(), seen.end(), std::not_equal_to<>()) != seen.end())
    fail("the ranks do not agree on the checkpoint to resume from in ", folder, ": ",
         dist::world_ranks_by_text(group, seen),
         ". Every rank must see the same checkpoints: put --job.dump_folder on a file system "
         "that all hosts share");
  return mine;
}

LoadedCheckpoint load_checkpoint_together(const CheckpointManager& manager, int64_t step,
                                          dist::ProcessGroup& group) {
  LoadedCheckpoint ck;
  dist::run_and_agree(group, cat("reading checkpoint step ", step), true,
                      [&] { ck = manager.load(step); });
  return ck;
}

std::string save_checkpoint(CheckpointManager& manager, const CheckpointData& data,
                            const dist::DeviceMesh& mesh, dist::ProcessGroup& world) {
  KILN_CHECK(world.world_ranks() == mesh.world().world_ranks(), "save_checkpoint over ",
             world.describe(), ": the group must hold the mesh's ranks, in its order");
  const bool lead = world.rank() == 0;
  const bool writer = writes_checkpoint_shards(mesh);
  const std::string step = cat("checkpoint step ", data.step);
  std::string temp;
  dist::run_and_agree(world, "starting " + step, lead, [&] { temp = manager.begin(data.step); });
  temp = broadcast_text(world, temp);
  ShardDigest mine;
  dist::run_and_agree(world, "writing " + step, writer,
                      [&] { mine = manager.write_shard(temp, data); });
  std::vector<ShardDigest> all = all_digests(world, mine);
  std::string path;
  // The closing exchange: published before any rank moves on.
  dist::run_and_agree(world, "publishing " + step, lead, [&] { path = manager.commit(data, all); });
  return path;
}

}  // namespace kiln::train
