// Skinny collectives and SPMD-safe regions (kiln/runtime/spmd.h) on 2 and 4
// ranks give the same bits: a small sharded step (parameters all_gathered,
// tensor-parallel regions inside model regions, gradients reduce_scattered,
// the loss averaged) run op by op, deferred, compiled and per-block
// compiled, each with collectives as programs of their own and inside the
// fused programs.
#include <gtest/gtest.h>

#include "kiln/dist/mesh.h"
#include "kiln/dist/world.h"
#include "kiln/kiln.h"
#include "kiln/ops/parallel_region.h"
#include "kiln/runtime/compile.h"
#include "kiln/runtime/defer.h"
#include "kiln/runtime/dispatch.h"
#include "kiln/runtime/executable.h"
#include "kiln/runtime/region.h"

namespace kiln {
namespace {

using namespace std::chrono_literals;

MeshAxis axis() { return {"dp_shard", dist::world()->size()}; }

// Two blocks: h <- h + leave(tanh(enter(h) w^T) w), w all_gathered from
// each rank's rows; the loss is averaged over the ranks.
std::vector<Tensor> step(const std::vector<Tensor>& a, const GradOptions& options) {
  ValueAndGrad r = value_and_grad(
      [](const std::vector<Tensor>& b) {
        Tensor w = all_gather(b[0], 0, axis());
        Tensor h = b[1];
        for (int l = 0; l < 2; ++l) {
          RegionGuard region("layers." + std::to_string(l));
          Tensor e = enter_parallel_region(h, axis());
          h = h + leave_parallel_region(matmul(tanh(matmul(e, w, false, true)), w), axis());
        }
        return std::vector<Tensor>{sum(h * h)};
      },
      options)({a[0], a[1]});
  return {all_reduce(r.values[0], axis(), ReduceOp::avg), a[0] - r.grads[0] * 0.01};
}

struct Result {
  float loss;
  std::vector<float> w;
};

Result read(const std::vector<Tensor>& out) {
  return {out[0].item<float>(), out[1].to_vector<float>()};
}

class SkinnyCollectivesMpi : public ::testing::Test {
 protected:
  void SetUp() override {
    dist::world()->set_timeout(30s);  // a failing rank must not hang the others for long
    dist::set_current_mesh(std::make_shared<dist::DeviceMesh>(dist::world(), dist::MeshDegrees{}));
    const int r = dist::world()->rank();
    Generator mine(10 + uint64_t(r)), shared(99);
    w_ = rand({2, 8}, mine) - 0.5;    // this rank's rows
    x_ = rand({3, 8}, shared) - 0.5;  // the same on every rank
    EagerModeGuard strict(EagerMode::strict);
    want_ = read(step({w_, x_}, {}));
  }
  void TearDown() override { dist::set_current_mesh(nullptr); }

  void expect_same(const Result& got, const std::string& what) const {
    EXPECT_EQ(got.loss, want_.loss) << what;
    EXPECT_EQ(got.w, want_.w) << what;
  }

  Tensor w_, x_;
  Result want_;
};

TEST_F(SkinnyCollectivesMpi, DeferAndFuse) {
  EagerModeGuard mode(EagerMode::defer_and_fuse);
  for (bool safe : {false, true}) {
    SpmdSafeGuard scope(safe);
    reset_defer_stats();
    expect_same(read(step({w_, x_}, {})), safe ? "defer_and_fuse, spmd_safe" : "defer_and_fuse");
    // all_gather, 2 leaves and 2 enter-vjp all_reduces, reduce_scatter, the loss's all_reduce.
    EXPECT_EQ(defer_stats().skinny_collectives, safe ? 0u : 7u);
  }
}

TEST_F(SkinnyCollectivesMpi, CompiledFunction) {
  for (bool safe : {false, true}) {
    CompileOptions o;
    o.donate = {0};
    o.spmd_safe = safe;
    CompiledFunction f = compile([](const std::vector<Tensor>& a) { return step(a, {}); }, o);
    for (int call = 0; call < 2; ++call)  // the second from the cache
      expect_same(read(f({apply1(KILN_OP("copy"), {w_}), x_})),
                  cat(safe ? "compiled, spmd_safe" : "compiled", ", call ", call));
    std::vector<const Executable*> programs = f.last_programs();
    // Skinny: each of the 7 collectives (as in DeferAndFuse) alone in a program.
    size_t alone = 0;
    for (const Executable* p : programs)
      for (const ir::Node& n : p->graph().nodes())
        if (is_collective(*n.op)) alone += p->graph().nodes().size() == 1;
    EXPECT_EQ(programs.size() == 1, safe);
    EXPECT_EQ(alone, safe ? 0u : 7u);
    EXPECT_EQ(programs.back()->stats().donated.size(), 1u);
  }
}

TEST_F(SkinnyCollectivesMpi, PerBlockCompile) {
  GradOptions per_block;
  per_block.compile_regions = ProgramOptions{default_pass_options(), {}};
  for (bool safe : {false, true}) {
    SpmdSafeGuard scope(safe);
    expect_same(read(step({w_, x_}, per_block)), safe ? "per-block, spmd_safe" : "per-block");
  }
}

}  // namespace
}  // namespace kiln
