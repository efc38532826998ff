// Skinny collectives (kiln/runtime/spmd.h) on a one-process mesh, where a
// collective is a copy: outside an SPMD-safe scope no compiled program
// except a one-op one holds a collective (defer_and_fuse, compile(fn),
// per-block compile); inside one, collectives stay in the fused programs.
// tests/dist/skinny_collectives_mpi_test.cc checks the bits on 2 and 4 ranks.
#include <gtest/gtest.h>

#include "kiln/compiler/collective_schedule.h"

#include "kiln/dist/mesh.h"
#include "kiln/dist/world.h"
#include "kiln/kiln.h"
#include "kiln/runtime/compile.h"
#include "kiln/runtime/defer.h"
#include "kiln/runtime/dispatch.h"
#include "kiln/runtime/executable.h"
#include "kiln/runtime/graph_runner.h"
#include "kiln/runtime/recording.h"
#include "kiln/runtime/region.h"
#include "tests/support/gradcheck.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

using test::expect_error;
using test::random_tensor;

const MeshAxis kAxis{"dp", 1};

class SkinnyCollectives : public ::testing::Test {
 protected:
  void SetUp() override {
    dist::set_current_mesh(std::make_shared<dist::DeviceMesh>(dist::world(), dist::MeshDegrees{}));
  }
  void TearDown() override { dist::set_current_mesh(nullptr); }
};

// Collectives of a program (a scheduled one's start and wait count once).
size_t collectives_in(const ir::Graph& g) {
  size_t n = 0;
  for (const ir::Node& node : g.nodes())
    n += is_collective(*node.op) && !compiler::is_collective_wait(*node.op);
  return n;
}

// Programs that hold a collective must hold nothing else.
void expect_skinny(const std::vector<const Executable*>& programs) {
  for (const Executable* p : programs) {
    const ir::Graph& g = p->graph();
    if (collectives_in(g) > 0) {
      EXPECT_EQ(g.nodes().size(), 1u) << ir::to_text(g);
    }
  }
}

TEST_F(SkinnyCollectives, TheRegionExitAndTheCollectivesAreCollectives) {
  for (const char* name : {"all_reduce", "all_gather", "reduce_scatter", "leave_parallel_region"})
    EXPECT_TRUE(is_collective(ir::get_op(name))) << name;
  for (const char* name : {"add", "enter_parallel_region", "matmul"})
    EXPECT_FALSE(is_collective(ir::get_op(name))) << name;
  EXPECT_FALSE(spmd_safe());
  {
    SpmdSafeGuard safe;
    EXPECT_TRUE(spmd_safe());
    SpmdSafeGuard not_here(false);
    EXPECT_FALSE(spmd_safe());
  }
  EXPECT_FALSE(spmd_safe());
}

TEST_F(SkinnyCollectives, DeferAndFuseRunsACollectiveAloneUnlessSafe) {
  Tensor x = random_tensor({4, 6}, DType::f32, 1);
  auto f = [&] { return exp(all_reduce(x * 2.0 + 1.0, kAxis)) * 3.0; };
  std::vector<float> strict = f().to_vector<float>();
  EagerModeGuard mode(EagerMode::defer_and_fuse);
  eval({});
  for (bool safe : {false, true}) {
    SpmdSafeGuard scope(safe);
    reset_defer_stats();
    Tensor y = f();
    eval({y});
    DeferStats s = defer_stats();
    // Skinny: before | all_reduce | after; safe: one region.
    EXPECT_EQ(s.flushes, safe ? 1u : 3u) << safe;
    EXPECT_EQ(s.skinny_collectives, safe ? 0u : 1u) << safe;
    EXPECT_EQ(y.to_vector<float>(), strict) << safe;
  }
}

// A step: w -= lr * all_reduce(grad of sum(tanh(x w))), w donated.
std::vector<Tensor> sgd_step(const std::vector<Tensor>& a) {
  ValueAndGrad r = value_and_grad([](const std::vector<Tensor>& b) {
    return std::vector<Tensor>{sum(tanh(matmul(b[1], b[0])))};
  })({a[0], a[1]});
  Tensor g = all_reduce(r.grads[0], kAxis, ReduceOp::avg);
  return {r.values[0], a[0] - g * 0.1};
}

TEST_F(SkinnyCollectives, CompiledFunctionsAreSplitAtCollectivesUnlessSafe) {
  Tensor w = random_tensor({6, 5}, DType::f32, 2), x = random_tensor({4, 6}, DType::f32, 3);
  std::vector<Tensor> want = sgd_step({w, x});
  for (int how = 0; how < 3; ++how) {  // skinny, a guard at the call, CompileOptions::spmd_safe
    CompileOptions o;
    o.donate = {0};
    o.spmd_safe = how == 2;
    CompiledFunction f = compile(sgd_step, o);
    SpmdSafeGuard scope(how == 1);
    std::vector<Tensor> got = f({apply1(KILN_OP("copy"), {w}), x});  // w is donated
    EXPECT_EQ(got[0].item<float>(), want[0].item<float>()) << how;
    EXPECT_EQ(got[1].to_vector<float>(), want[1].to_vector<float>()) << how;
    std::vector<const Executable*> programs = f.last_programs();
    if (how == 0) {
      ASSERT_EQ(programs.size(), 3u);  // forward and backward | all_reduce | update
      expect_skinny(programs);
      EXPECT_EQ(collectives_in(programs[1]->graph()), 1u);
      // w is last read by the update, which writes the new w into its buffer.
      EXPECT_EQ(programs[2]->stats().donated.size(), 1u);
      expect_error([&] { f.last_executable(); }, "3 programs");
    } else {
      ASSERT_EQ(programs.size(), 1u) << how;
      EXPECT_EQ(collectives_in(programs[0]->graph()), 1u) << how;
      EXPECT_EQ(programs[0]->stats().donated.size(), 1u) << how;
    }
  }
}

// Two blocks whose forward (and so backward) holds an all_reduce.
std::vector<Tensor> blocks_loss(const std::vector<Tensor>& a) {
  Tensor h = a[0];
  for (int l = 0; l < 2; ++l) {
    RegionGuard region("layers." + std::to_string(l));
    h = tanh(all_reduce(matmul(h, a[size_t(l) + 1]), kAxis)) + h;
  }
  return {sum(h * h)};
}

TEST_F(SkinnyCollectives, PerBlockProgramsHoldNoCollectiveUnlessSafe) {
  std::vector<Tensor> args{random_tensor({3, 4}, DType::f32, 4),
                           random_tensor({4, 4}, DType::f32, 5),
                           random_tensor({4, 4}, DType::f32, 6)};
  auto rec = test::trace_loss_and_grads(blocks_loss, args);
  const ir::Graph& g = rec->graph;
  size_t in_regions = 0;
  for (const ir::Node& n : g.nodes()) in_regions += n.region >= 0 && is_collective(*n.op);
  EXPECT_EQ(in_regions, 4u);  // forward and backward of each block
  for (bool safe : {false, true}) {
    size_t held = 0;
    for (auto [begin, end] : region_programs(g, safe))
      for (size_t i = begin; i < end; ++i) held += is_collective(*g.nodes()[i].op);
    EXPECT_EQ(held, safe ? in_regions : 0u) << safe;
  }
  std::vector<Tensor> plain = run_graph(g, rec->captured, "blocks");
  for (bool safe : {false, true}) {
    SpmdSafeGuard scope(safe);
    std::vector<Tensor> got = run_graph_compiling_regions(g, rec->captured, "blocks",
                                                          ProgramOptions{default_pass_options(), {}});
    for (size_t i = 0; i < plain.size(); ++i)
      EXPECT_EQ(got[i].to_vector<float>(), plain[i].to_vector<float>()) << safe << " output " << i;
  }
}

}  // namespace
}  // namespace kiln
