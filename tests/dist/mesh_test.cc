// Device mesh layout: degrees from TorchTitan's flags, errors for meshes
// that do not fit the world, topology-aware rank order, and the mesh of a
// run not started by mpirun.
#include "kiln/dist/mesh.h"

#include <gtest/gtest.h>

#include <functional>

#include "kiln/base/error.h"
#include "kiln/dist/world.h"
#include "tests/support/support.h"

namespace kiln::dist {
namespace {

using test::expect_error;

std::vector<int> one_host(int n) { return std::vector<int>(size_t(n), 0); }

MeshLayout layout(int64_t rep, int64_t shard, int64_t tp, int world) {
  return MeshLayout({rep, shard, tp}, world, one_host(world));
}

TEST(MeshLayout, ShardDegreeMinusOneTakesTheRest) {
  MeshLayout m = layout(2, -1, 2, 8);
  EXPECT_EQ(m.size("dp_replicate"), 2);
  EXPECT_EQ(m.size("dp_shard"), 2);
  EXPECT_EQ(m.size("tp"), 2);
  EXPECT_EQ(m.size("dp"), 4);
  EXPECT_EQ(m.describe(), "dp_replicate 2 x dp_shard 2 x tp 2");
  EXPECT_EQ(layout(1, -1, 1, 4).size("dp_shard"), 4);
}

TEST(MeshLayout, RowMajorWithTpInnermost) {
  MeshLayout m = layout(2, 2, 2, 8);
  // Rank 5 = position 5 = (replica 1, shard 0, tp 1).
  EXPECT_EQ(m.coordinate(5, "dp_replicate"), 1);
  EXPECT_EQ(m.coordinate(5, "dp_shard"), 0);
  EXPECT_EQ(m.coordinate(5, "tp"), 1);
  EXPECT_EQ(m.coordinate(5, "dp"), 2);
  EXPECT_EQ(m.group_of(5, "tp"), (std::vector<int>{4, 5}));
  EXPECT_EQ(m.group_of(5, "dp_shard"), (std::vector<int>{5, 7}));
  EXPECT_EQ(m.group_of(5, "dp_replicate"), (std::vector<int>{1, 5}));
  EXPECT_EQ(m.group_of(5, "dp"), (std::vector<int>{1, 3, 5, 7}));
  // Every rank's split arguments name its group and its place in it.
  for (int r = 0; r < 8; ++r)
    for (const char* dim : {"dp_replicate", "dp_shard", "tp", "dp"}) {
      auto [color, key] = m.split_of(r, dim);
      EXPECT_EQ(m.group_of(r, dim)[size_t(key)], r) << dim;
      for (int q : m.group_of(r, dim)) EXPECT_EQ(m.split_of(q, dim).first, color) << dim;
    }
}

// Expert parallelism inside dp_shard: dp_shard 4 = efsdp 2 x ep 2, ep
// innermost, so an ep group is consecutive dp_shard ranks.
TEST(MeshLayout, ExpertParallelismSplitsTheShardDimension) {
  MeshLayout m({2, 4, 1, 2}, 8, one_host(8));
  EXPECT_EQ(m.size("dp_shard"), 4);
  EXPECT_EQ(m.size("ep"), 2);
  EXPECT_EQ(m.size("efsdp"), 2);
  EXPECT_EQ(m.size("dp"), 8);
  EXPECT_EQ(m.describe(), "dp_replicate 2 x dp_shard 4 (efsdp 2 x ep 2) x tp 1");
  // Rank 6: replica 1, efsdp 1, ep 0.
  EXPECT_EQ(m.coordinate(6, "ep"), 0);
  EXPECT_EQ(m.coordinate(6, "efsdp"), 1);
  EXPECT_EQ(m.coordinate(6, "dp_shard"), 2);  // efsdp x ep flattened
  EXPECT_EQ(m.group_of(6, "ep"), (std::vector<int>{6, 7}));
  EXPECT_EQ(m.group_of(6, "efsdp"), (std::vector<int>{4, 6}));
  EXPECT_EQ(m.group_of(6, "dp_shard"), (std::vector<int>{4, 5, 6, 7}));
  for (int r = 0; r < 8; ++r)
    for (const char* dim : {"efsdp", "ep", "dp_shard", "dp"}) {
      auto [color, key] = m.split_of(r, dim);
      EXPECT_EQ(m.group_of(r, dim)[size_t(key)], r) << dim;
    }
  expect_error([] { MeshLayout({1, 4, 1, 3}, 4, one_host(4)); },
               "expert_parallel_degree 3 does not divide data_parallel_shard_degree 4");
  expect_error([] { MeshLayout({1, -1, 1, 0}, 4, one_host(4)); },
               "expert_parallel_degree is 0");
}

TEST(MeshLayout, RanksOfAHostStayTogetherInTheInnerDims) {
  // mpirun --map-by node over two hosts: even ranks on host A, odd on B.
  MeshLayout m({1, 2, 2}, 4, std::vector<int>{7, 3, 7, 3});
  EXPECT_EQ(m.ranks(), (std::vector<int>{0, 2, 1, 3}));
  EXPECT_EQ(m.group_of(0, "tp"), (std::vector<int>{0, 2}));  // both on host 7
  EXPECT_EQ(m.group_of(1, "tp"), (std::vector<int>{1, 3}));  // both on host 3
  EXPECT_EQ(m.group_of(0, "dp_shard"), (std::vector<int>{0, 1}));  // across hosts
  // Ranks already grouped by host keep their order.
  EXPECT_EQ(MeshLayout({1, 2, 2}, 4, std::vector<int>{0, 0, 1, 1}).ranks(),
            (std::vector<int>{0, 1, 2, 3}));
}

TEST(MeshLayout, DegreesThatDoNotFitTheWorldAreClearErrors) {
  expect_error([] { layout(2, 2, 2, 4); },
               "data_parallel_replicate_degree 2 x data_parallel_shard_degree 2 x "
               "tensor_parallel_degree 2 = 8 ranks, but this run has 4");
  expect_error([] { layout(1, 3, 1, 4); }, "make the product 4");
  expect_error([] { layout(3, -1, 1, 4); }, "does not divide the 4 ranks");
  expect_error([] { layout(0, -1, 1, 4); }, "data_parallel_replicate_degree is 0");
  expect_error([] { layout(1, -2, 1, 4); }, "data_parallel_shard_degree is -2");
  expect_error([] { layout(1, -1, 0, 4); }, "tensor_parallel_degree is 0");
  expect_error([] { layout(1, -1, 1, 2).size("dp_shrad"); }, "did you mean 'dp_shard'");
  expect_error([] { layout(1, -1, 1, 2).coordinate(2, "tp"); }, "rank 2 is not in a world of 2");
}

TEST(DeviceMesh, AWorldOfOneWithoutMpirun) {
  ASSERT_FALSE(launched_by_mpirun());
  auto w = world();
  EXPECT_EQ(w->size(), 1);
  EXPECT_EQ(w->rank(), 0);
  DeviceMesh mesh(w, {});
  for (const char* dim : {"dp_replicate", "dp_shard", "tp", "dp"}) {
    EXPECT_EQ(mesh.group(dim).size(), 1) << dim;
    EXPECT_EQ(mesh.group(dim).name(), dim);
    EXPECT_EQ(mesh.coordinate(dim), 0);
  }
  expect_error([&] { DeviceMesh(w, {1, 1, 2}); }, "but this run has 1");
  expect_error([&] { mesh.group("pp"); }, "has no dimension 'pp'");
  // A group of one copies.
  std::vector<float> x{1, 2, 3}, y(3);
  mesh.group("dp").all_reduce(x.data(), y.data(), 3, DType::f32, ReduceOp::avg).wait();
  EXPECT_EQ(y, x);
  expect_error([&] { mesh.group("tp").send(x.data(), 3, DType::f32, 0); }, "cannot send to itself");
}

TEST(DeviceMesh, APlanOfAWorldWithoutProcessGroups) {
  DeviceMesh plan({1, -1, 2}, 8, 5);  // rank 5 = (shard 2, tp 1)
  EXPECT_EQ(plan.size("dp_shard"), 4);
  EXPECT_EQ(plan.coordinate("dp_shard"), 2);
  EXPECT_EQ(plan.coordinate("tp"), 1);
  expect_error([&] { plan.world(); }, "this mesh is a plan (dp_replicate 1 x dp_shard 4 x tp 2)");
  expect_error([&] { plan.group("tp"); }, "has no process groups");
  // The degrees are checked as a run's are.
  expect_error([] { DeviceMesh({1, 1, 2}, 1, 0); }, "but this run has 1");
  expect_error([] { DeviceMesh({}, 2, 2); }, "rank 2 is not in a world of 2");
}

}  // namespace
}  // namespace kiln::dist
