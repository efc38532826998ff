// The IR's collective ops (kiln/ops/collectives.h) run by the kiln/dist
// kernels on the current mesh (ctest runs this on 2 and 4 ranks): eagerly,
// under value_and_grad (the vjp collectives) and compiled. References are
// computed in each process from every rank's input with ordinary ops.
#include <gtest/gtest.h>

#include <functional>

#include "kiln/dist/mesh.h"
#include "kiln/dist/world.h"
#include "kiln/kiln.h"
#include "kiln/runtime/compile.h"
#include "tests/support/support.h"

namespace kiln::dist {
namespace {

using test::expect_error;

using namespace std::chrono_literals;

int ranks() { return world()->size(); }
int me() { return world()->rank(); }

std::shared_ptr<DeviceMesh> use_mesh(const MeshDegrees& d) {
  world()->set_timeout(30s);  // a failed assertion on one rank must not hang the others for long
  auto mesh = std::make_shared<DeviceMesh>(world(), d);
  set_current_mesh(mesh);
  return mesh;
}

// Rank r's tensor: multiples of 1/8, so sums of a few are exact in f32 and bf16.
Tensor input(int r, const Shape& shape, DType dtype = DType::f32) {
  std::vector<float> v;
  for (int64_t i = 0; i < shape.numel(); ++i)
    v.push_back(float((r * 17 + i * 5) % 16) / 8.0f - 1.0f);
  return from_vector<float>(v, shape).to(dtype);
}

std::vector<Tensor> everyones(const Shape& shape, DType dtype = DType::f32) {
  std::vector<Tensor> all;
  for (int r = 0; r < ranks(); ++r) all.push_back(input(r, shape, dtype));
  return all;
}

void expect_equal(const Tensor& got, const Tensor& want, const std::string& what) {
  EXPECT_EQ(got.shape(), want.shape()) << what;
  EXPECT_EQ(got.dtype(), want.dtype()) << what;
  EXPECT_EQ(got.to_vector<float>(), want.to_vector<float>()) << what;
}

TEST(CollectiveKernels, AllGatherThenReduceScatterGivesNTimesX) {
  use_mesh({});
  MeshAxis shard{"dp_shard", ranks()};
  for (DType dt : {DType::f32, DType::bf16})
    for (int dim : {0, 1}) {
      Tensor x = input(me(), {3, 5}, dt);
      Tensor g = all_gather(x, dim, shard);
      expect_equal(g, concat(everyones({3, 5}, dt), dim), cat("all_gather dim ", dim));
      expect_equal(reduce_scatter(g, dim, shard), x * double(ranks()),
                   cat("reduce_scatter dim ", dim));
      expect_equal(reduce_scatter(g, dim, shard, kiln::ReduceOp::avg), x, cat("avg dim ", dim));
    }
}

TEST(CollectiveKernels, AllGatherCastGathersEachShardRounded) {
  use_mesh({});
  MeshAxis shard{"dp_shard", ranks()};
  for (int dim : {0, 1}) {
    // Thirds are not bf16 values: each rank's chunk is rounded to bf16.
    Tensor x = input(me(), {3, 5}) / 3.0;
    std::vector<Tensor> all;
    for (const Tensor& t : everyones({3, 5})) all.push_back((t / 3.0).to(DType::bf16));
    expect_equal(all_gather(x, dim, shard, DType::bf16), concat(all, dim),
                 cat("all_gather_cast dim ", dim));
  }
}

// SimpleFSDP's mixed precision: an f32 shard gathered in bf16 gets its
// gradient summed in f32. The cotangents (c of each rank: 1 + k/128, bf16
// values) sum to values such as 4 + 6/128 that bf16 cannot hold (its spacing
// at 4 is 1/32) but f32 holds exactly: the gradient must be that exact sum.
TEST(CollectiveKernels, AllGatherCastGradientIsTheF32SumOfTheCotangents) {
  use_mesh({});
  const int n = ranks();
  MeshAxis shard{"dp_shard", n};
  auto c_of = [&](int r) {
    std::vector<float> v;
    for (int64_t i = 0; i < 3 * n * 2; ++i) v.push_back(1.0f + float((r + i) % 8) / 128.0f);
    return v;
  };
  std::vector<float> mine = c_of(me());
  Tensor c = from_vector<float>(mine, {3 * n, 2});
  auto vag = value_and_grad([&](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{sum(all_gather(a[0], 0, shard, DType::bf16).to(DType::f32) * c)};
  });
  ValueAndGrad r = vag({input(me(), {3, 2})});
  ASSERT_EQ(r.grads[0].dtype(), DType::f32);
  std::vector<float> got = r.grads[0].to_vector<float>();
  bool bf16_would_round = false;
  for (int64_t i = 0; i < 6; ++i) {
    double want = 0;  // rank me()'s rows of every rank's c, summed exactly
    for (int q = 0; q < n; ++q) want += double(c_of(q)[size_t(me() * 6 + i)]);
    EXPECT_EQ(double(got[size_t(i)]), want) << "element " << i;
    Tensor in_bf16 = from_vector<float>({float(want)}, {1}).to(DType::bf16);
    bf16_would_round |= double(in_bf16.item<float>()) != want;
  }
  EXPECT_TRUE(bf16_would_round) << "the test should tell an f32 sum from a bf16 one";
}

TEST(CollectiveKernels, AllReduceAllToAllBroadcastReduce) {
  use_mesh({});
  int n = ranks();
  MeshAxis dp{"dp", n};
  std::vector<Tensor> all = everyones({2, 4 * n});
  Tensor x = all[size_t(me())];

  Tensor sum = all[0], mx = all[0];
  for (int r = 1; r < n; ++r) sum = sum + all[size_t(r)], mx = maximum(mx, all[size_t(r)]);
  expect_equal(all_reduce(x, dp), sum, "all_reduce sum");
  expect_equal(all_reduce(x, dp, kiln::ReduceOp::max), mx, "all_reduce max");
  expect_equal(all_reduce(x.to(DType::bf16), dp, kiln::ReduceOp::avg),
               (sum / double(n)).to(DType::bf16), "all_reduce avg bf16");

  // Chunk j of rank r (along dim 1) lands on rank j, at position r along dim 0.
  std::vector<Tensor> mine;
  for (int r = 0; r < n; ++r) mine.push_back(all[size_t(r)].slice(1, me() * 4, me() * 4 + 4));
  expect_equal(all_to_all(x, 1, 0, dp), concat(mine, 0), "all_to_all");
  expect_equal(all_to_all(x, 1, 1, dp), concat(mine, 1), "all_to_all onto the same dim");

  expect_equal(broadcast(x, n - 1, dp), all[size_t(n - 1)], "broadcast");
  expect_equal(reduce(x, 1, dp), me() == 1 ? sum : zeros_like(x), "reduce");
}

TEST(CollectiveKernels, GradientsRunTheAdjointCollectives) {
  use_mesh({});
  int n = ranks();
  MeshAxis shard{"dp_shard", n};
  Tensor c = input(7, {3 * n, 2});  // the same on every rank
  auto vag = value_and_grad([&](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{sum(all_gather(a[0], 0, shard) * c)};
  });
  ValueAndGrad r = vag({input(me(), {3, 2})});
  // d/dx_r of sum_ranks(sum(gather * c)) = n copies of c's chunk r, summed.
  expect_equal(r.grads[0], c.slice(0, 3 * me(), 3 * me() + 3) * double(n), "gradient");
}

TEST(CollectiveKernels, CompiledProgramsRunCollectives) {
  use_mesh({});
  MeshAxis shard{"dp_shard", ranks()};
  auto fn = compile([&](const std::vector<Tensor>& a) {
    return std::vector<Tensor>{reduce_scatter(all_gather(a[0], 1, shard) * 2.0, 1, shard)};
  });
  Tensor x = input(me(), {4, 3});
  expect_equal(fn({x})[0], x * double(2 * ranks()), "compiled");
  expect_equal(fn({x})[0], x * double(2 * ranks()), "compiled, cached");
}

TEST(CollectiveKernels, EachMeshDimensionIsItsOwnGroup) {
  int n = ranks();
  // 4 ranks: 2 replicas x 2 shards; 2 ranks: tensor parallel 2.
  auto mesh = use_mesh(n == 4 ? MeshDegrees{2, -1, 1} : MeshDegrees{1, -1, 2});
  std::vector<Tensor> all = everyones({5});
  for (const char* dim : {"dp_replicate", "dp_shard", "tp", "dp"}) {
    std::vector<int> members = mesh->layout().group_of(me(), dim);
    Tensor want = all[size_t(members[0])];
    for (size_t i = 1; i < members.size(); ++i) want = want + all[size_t(members[i])];
    MeshAxis axis{dim, int64_t(members.size())};
    expect_equal(all_reduce(all[size_t(me())], axis), want, dim);
  }
}

TEST(CollectiveKernels, AxisErrorsSurfaceAtTheNextSynchronisation) {
  use_mesh({});
  Tensor x = input(me(), {4});
  expect_error([&] { all_reduce(x, {"pp", 2}).to_vector<float>(); },
               "device mesh has no dimension 'pp'");
  expect_error([&] { all_reduce(x, {"dp_shard", ranks() + 1}).to_vector<float>(); },
               cat("built for a group of ", ranks() + 1, " along mesh axis 'dp_shard'"));
  // A dimension of size 1 copies.
  expect_equal(all_gather(x, 0, {"tp", 1}), x, "tp of size 1");
  set_current_mesh(nullptr);
  expect_error([&] { all_reduce(x, {"dp", ranks()}).to_vector<float>(); },
               "needs a device mesh, and this process has none");
}

}  // namespace
}  // namespace kiln::dist
