#include "kiln/dist/mesh.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <mutex>
#include <numeric>

#include "kiln/base/error.h"
#include "kiln/base/nearest.h"

namespace kiln::dist {
namespace {

// The mesh's own dimensions, outermost first, and the flattened ones.
constexpr const char* kDimNames[] = {"dp_replicate", "efsdp", "ep", "tp"};
constexpr int kDims = 4;
const std::vector<std::pair<std::string_view, std::vector<int>>> kFlattened = {
    {"dp_shard", {1, 2}}, {"dp", {0, 1, 2}}};

// Every rank's host, as small ids (equal: same host), from the hostnames.
std::vector<int> hosts_of(ProcessGroup& world) {
  std::array<int64_t, 9> mine{};  // up to 71 characters, zero-padded
  char name[sizeof mine] = {};
  gethostname(name, sizeof name - 1);
  std::memcpy(mine.data(), name, sizeof name);
  std::vector<int64_t> all(mine.size() * size_t(world.size()));
  world.all_gather(mine.data(), all.data(), int64_t(mine.size()), DType::i64).wait();
  std::map<std::vector<int64_t>, int> ids;
  std::vector<int> host;
  for (int r = 0; r < world.size(); ++r) {
    auto at = all.begin() + r * int64_t(mine.size());
    host.push_back(ids.emplace(std::vector<int64_t>(at, at + int64_t(mine.size())), int(ids.size()))
                       .first->second);
  }
  return host;
}

}  // namespace

MeshLayout::MeshLayout(const MeshDegrees& d, int world_size, std::span<const int> host_of_rank) {
  KILN_CHECK(world_size >= 1, "device mesh: the world size must be >= 1, got ", world_size);
  KILN_CHECK(int(host_of_rank.size()) == world_size, "device mesh: ", host_of_rank.size(),
             " host ids for ", world_size, " ranks");
  int64_t rep = d.data_parallel_replicate_degree, shard = d.data_parallel_shard_degree,
          tp = d.tensor_parallel_degree, ep = d.expert_parallel_degree;
  KILN_CHECK(rep >= 1, "--parallelism.data_parallel_replicate_degree is ", rep,
             "; it must be >= 1");
  KILN_CHECK(tp >= 1, "--parallelism.tensor_parallel_degree is ", tp, "; it must be >= 1");
  KILN_CHECK(shard >= 1 || shard == -1, "--parallelism.data_parallel_shard_degree is ", shard,
             "; it must be >= 1, or -1 for the ranks the other degrees leave");
  if (shard == -1) {
    KILN_CHECK(world_size % (rep * tp) == 0, "device mesh: data_parallel_replicate_degree ", rep,
               " x tensor_parallel_degree ", tp, " = ", rep * tp, " does not divide the ",
               world_size, " ranks of this run, so data_parallel_shard_degree = -1 has no "
               "value; choose degrees whose product divides ", world_size);
    shard = world_size / (rep * tp);
  }
  KILN_CHECK(rep * shard * tp == world_size, "device mesh: data_parallel_replicate_degree ", rep,
             " x data_parallel_shard_degree ", shard, " x tensor_parallel_degree ", tp, " = ",
             rep * shard * tp, " ranks, but this run has ", world_size,
             " (mpirun -n); make the product ", world_size,
             ", or set --parallelism.data_parallel_shard_degree=-1 to use the ranks the others "
             "leave");
  KILN_CHECK(ep >= 1, "--parallelism.expert_parallel_degree is ", ep, "; it must be >= 1");
  KILN_CHECK(shard % ep == 0, "device mesh: expert_parallel_degree ", ep,
             " does not divide data_parallel_shard_degree ", shard,
             ": expert parallelism borrows its ranks from the FSDP (dp_shard) ranks, as in "
             "TorchTitan; choose an expert degree that divides ", shard);
  sizes_ = {rep, shard / ep, ep, tp};

  // Hosts in the order of their lowest rank, ranks host by host (in rank
  // order within a host): consecutive positions share a host.
  std::map<int, int> first_rank;
  for (int r = 0; r < world_size; ++r) first_rank.emplace(host_of_rank[size_t(r)], r);
  ranks_.resize(size_t(world_size));
  std::iota(ranks_.begin(), ranks_.end(), 0);
  std::stable_sort(ranks_.begin(), ranks_.end(), [&](int a, int b) {
    return first_rank[host_of_rank[size_t(a)]] < first_rank[host_of_rank[size_t(b)]];
  });
  position_of_.resize(size_t(world_size));
  for (int p = 0; p < world_size; ++p) position_of_[size_t(ranks_[size_t(p)])] = p;
}

std::vector<int> MeshLayout::dims_of(std::string_view dim) const {
  for (int i = 0; i < kDims; ++i)
    if (dim == kDimNames[i]) return {i};
  for (const auto& [name, dims] : kFlattened)
    if (dim == name) return dims;
  std::vector<std::string> names{"dp_replicate", "dp_shard", "efsdp", "ep", "tp", "dp"};
  fail("device mesh has no dimension '", dim, "' (did you mean '", nearest(dim, names),
       "'?); its dimensions are dp_replicate, dp_shard (efsdp x ep), tp, and dp "
       "(dp_replicate x dp_shard)");
}

std::vector<int64_t> MeshLayout::coordinates(int world_rank) const {
  KILN_CHECK(world_rank >= 0 && world_rank < world_size(), "device mesh: rank ", world_rank,
             " is not in a world of ", world_size());
  int64_t pos = position_of_[size_t(world_rank)];
  std::vector<int64_t> c(kDims);
  for (int i = kDims - 1; i >= 0; --i) {
    c[size_t(i)] = pos % sizes_[size_t(i)];
    pos /= sizes_[size_t(i)];
  }
  return c;
}

int64_t MeshLayout::size(std::string_view dim) const {
  int64_t n = 1;
  for (int i : dims_of(dim)) n *= sizes_[size_t(i)];
  return n;
}

int64_t MeshLayout::coordinate(int world_rank, std::string_view dim) const {
  std::vector<int64_t> c = coordinates(world_rank);
  int64_t index = 0;
  for (int i : dims_of(dim)) index = index * sizes_[size_t(i)] + c[size_t(i)];
  return index;
}

std::pair<int, int> MeshLayout::split_of(int world_rank, std::string_view dim) const {
  std::vector<int> in = dims_of(dim);
  std::vector<int64_t> c = coordinates(world_rank);
  int64_t color = 0;
  for (int i = 0; i < kDims; ++i)
    if (std::find(in.begin(), in.end(), i) == in.end())
      color = color * sizes_[size_t(i)] + c[size_t(i)];
  return {int(color), int(coordinate(world_rank, dim))};
}

std::vector<int> MeshLayout::group_of(int world_rank, std::string_view dim) const {
  int color = split_of(world_rank, dim).first;
  std::vector<int> members(size_t(size(dim)));
  for (int r = 0; r < world_size(); ++r) {
    auto [c, key] = split_of(r, dim);
    if (c == color) members[size_t(key)] = r;
  }
  return members;
}

std::string MeshLayout::describe() const {
  return cat("dp_replicate ", sizes_[0], " x dp_shard ", sizes_[1] * sizes_[2],
             sizes_[2] > 1 ? cat(" (efsdp ", sizes_[1], " x ep ", sizes_[2], ")") : "", " x tp ",
             sizes_[3]);
}

DeviceMesh::DeviceMesh(std::shared_ptr<ProcessGroup> world, const MeshDegrees& degrees)
    : world_(std::move(world)),
      rank_(world_->rank()),
      layout_(degrees, world_->size(), hosts_of(*world_)) {
  for (const char* dim : {"dp_replicate", "dp_shard", "efsdp", "ep", "tp", "dp"}) {
    auto [color, key] = layout_.split_of(world_->rank(), dim);
    groups_.emplace_back(dim, world_->split(color, key, dim));
  }
}

DeviceMesh::DeviceMesh(const MeshDegrees& degrees, int world_size, int rank)
    : rank_(rank), layout_(degrees, world_size, std::vector<int>(size_t(std::max(world_size, 0)))) {
  KILN_CHECK(rank >= 0 && rank < world_size, "device mesh: rank ", rank, " is not in a world of ",
             world_size);
}

ProcessGroup& DeviceMesh::world() const {
  KILN_CHECK(world_, "device mesh: this mesh is a plan (", layout_.describe(),
             "); it has no process groups");
  return *world_;
}

ProcessGroup& DeviceMesh::group(std::string_view dim) const {
  layout_.size(dim);  // raises for an unknown dimension
  world();            // raises for a plan
  return *std::find_if(groups_.begin(), groups_.end(), [&](const auto& g) {
            return g.first == dim;
          })->second;
}

int64_t DeviceMesh::coordinate(std::string_view dim) const {
  return layout_.coordinate(rank_, dim);
}

namespace {
std::mutex g_mesh_mu;
std::shared_ptr<DeviceMesh> g_mesh;
}  // namespace

void set_current_mesh(std::shared_ptr<DeviceMesh> mesh) {
  std::lock_guard lock(g_mesh_mu);
  g_mesh = std::move(mesh);
}

std::shared_ptr<DeviceMesh> current_mesh() {
  std::lock_guard lock(g_mesh_mu);
  return g_mesh;
}

}  // namespace kiln::dist
