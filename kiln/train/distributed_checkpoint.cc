#include "kiln/train/distributed_checkpoint.h"

#include "kiln/base/error.h"

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

std::string save_checkpoint(CheckpointManager& manager, const CheckpointData& data,
                            const dist::DeviceMesh& mesh, dist::ProcessGroup& world) {
  KILN_CHECK(world.world_ranks() == mesh.world().world_ranks(), "save_checkpoint over ",
             world.describe(), ": the group must hold the mesh's ranks, in its order");
  const bool lead = world.rank() == 0;
  const bool writer = writes_checkpoint_shards(mesh);
  std::string temp = broadcast_text(world, lead ? manager.begin(data.step) : "");
  ShardDigest mine = writer ? manager.write_shard(temp, data) : ShardDigest{};
  std::vector<ShardDigest> all = all_digests(world, mine);
  std::string path = lead ? manager.commit(data, all) : "";
  world.barrier().wait();  // published before any rank moves on
  return path;
}

}  // namespace kiln::train
