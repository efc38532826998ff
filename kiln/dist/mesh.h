// The device mesh: the world's ranks arranged in a grid with named
// dimensions, built from TorchTitan's parallelism degrees, with a process
// group per dimension. Dimensions, outermost first:
//   dp_replicate  HSDP replicas (all_reduce of gradients, once a step)
//   dp_shard      FSDP shards (all_gather of parameters, reduce_scatter of
//                 gradients, every layer), itself efsdp x ep:
//     efsdp       the FSDP shards of the expert parameters (ranks holding
//                 the same experts)
//     ep          expert parallelism (the experts split over it; tokens
//                 exchanged with all_to_all in every MoE layer)
//   tp            tensor parallelism (activations, several times a layer)
// and "dp", dp_replicate x dp_shard flattened: the data-parallel ranks a
// global batch is split across. Expert parallelism borrows its ranks from
// dp_shard, as in TorchTitan: they still take their own share of the batch
// and shard the dense parameters. Dimensions of size 1 exist too; their
// collectives are copies.
//
// Topology-aware order: mesh positions are numbered row-major (tp
// innermost), and the world's ranks are given to them host by host, so the
// innermost dimensions, which communicate most, stay within a host whenever
// their size divides the ranks per host.
#pragma once
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/dist/process_group.h"

namespace kiln::dist {

// --parallelism.* in the trainer's config.
struct MeshDegrees {
  int64_t data_parallel_replicate_degree = 1;
  int64_t data_parallel_shard_degree = -1;  // -1: the ranks the others leave
  int64_t tensor_parallel_degree = 1;
  int64_t expert_parallel_degree = 1;  // must divide the dp_shard degree
};

// Which rank sits where, without any process group (so it is testable in
// one process).
class MeshLayout {
 public:
  // host_of_rank[r] identifies rank r's host (equal ids: the same host).
  MeshLayout(const MeshDegrees& degrees, int world_size, std::span<const int> host_of_rank);

  int world_size() const { return int(ranks_.size()); }
  int64_t size(std::string_view dim) const;
  // The world rank at each mesh position, positions numbered row-major.
  const std::vector<int>& ranks() const { return ranks_; }
  // world_rank's index along dim.
  int64_t coordinate(int world_rank, std::string_view dim) const;
  // The world ranks of world_rank's group along dim, in group-rank order.
  std::vector<int> group_of(int world_rank, std::string_view dim) const;
  // Process-group split arguments of world_rank's group along dim: the
  // group's number (color) and world_rank's rank in it (key).
  std::pair<int, int> split_of(int world_rank, std::string_view dim) const;
  // "dp_replicate 1 x dp_shard 2 x tp 2", "... x dp_shard 4 (efsdp 2 x ep 2) x ...".
  std::string describe() const;

 private:
  std::vector<int> dims_of(std::string_view dim) const;  // indices into sizes_
  std::vector<int64_t> coordinates(int world_rank) const;

  std::vector<int64_t> sizes_;    // dp_replicate, efsdp, ep, tp
  std::vector<int> ranks_;        // position -> world rank
  std::vector<int> position_of_;  // world rank -> position
};

class DeviceMesh {
 public:
  // A collective over `world`: every rank must build the same mesh.
  DeviceMesh(std::shared_ptr<ProcessGroup> world, const MeshDegrees& degrees);
  // The mesh a world of `world_size` ranks on one host would build, as
  // `rank` sees it, with no process groups and no communication: for
  // planning a run (`kiln train --dry-run`). The degrees are checked as a
  // real run checks them; world() and group() raise.
  DeviceMesh(const MeshDegrees& degrees, int world_size, int rank);

  const MeshLayout& layout() const { return layout_; }
  ProcessGroup& world() const;
  // The group of this rank along dim ("dp_replicate", "dp_shard", "efsdp",
  // "ep", "tp", "dp").
  ProcessGroup& group(std::string_view dim) const;
  int64_t size(std::string_view dim) const { return layout_.size(dim); }
  int64_t coordinate(std::string_view dim) const;

 private:
  std::shared_ptr<ProcessGroup> world_;  // null in a plan
  int rank_;
  MeshLayout layout_;
  std::vector<std::pair<std::string, std::shared_ptr<ProcessGroup>>> groups_;
};

// The mesh whose dimensions the IR's collectives name (their mesh_axis
// attribute): set once by whoever builds the run (the trainer), read by the
// collective kernels on any thread. Null when none is set.
void set_current_mesh(std::shared_ptr<DeviceMesh> mesh);
std::shared_ptr<DeviceMesh> current_mesh();

}  // namespace kiln::dist
