#include "kiln/compiler/pipeline.h"

#include "kiln/runtime/kernel.h"
#include "tests/compiler/pass_test_util.h"
#include "tests/compiler/random_graphs.h"

namespace kiln::compiler::test {
namespace {

TEST(Pipeline, OptionsPrintForTheCacheFingerprint) {
  EXPECT_EQ(to_string(PassOptions{}), "simplify=1,cse=1,dce=1,fuse=1,overlap=1");
  EXPECT_EQ(to_string(PassOptions{.cse = false, .fuse = false}), "simplify=1,cse=0,dce=1,fuse=0,overlap=1");
}

// Transposes that cancel, a duplicated subexpression, a unit constant, a dead
// branch and elementwise chains around a matmul and a reduction.
const char* kGraph = R"(
  graph(%0: f32[8,16], %1: f32[16,16], %2: f32[16]) {
    %3: f32[16,8] = permute(%0) {dims=[1,0]}
    %4: f32[8,16] = permute(%3) {dims=[1,0]}
    %5: f32[8,16] = tanh(%4)
    %6: f32[8,16] = tanh(%0)
    %7: f32[8,16] = add(%5, %6)
    %8: f32[] = full() {shape=[], value=1}
    %9: f32[8,16] = mul(%7, %8)
    %10: f32[8,16] = sub(%9, %2)
    %11: f32[8,16] = matmul(%10, %1)
    %12: f32[8,16] = exp(%11)
    %13: f32[8,16] = sigmoid(%12)
    %14: f32[8] = sum(%13) {axes=[1]}
    %15: f32[8,16] = log(%13)
    %16: f64[8,16] = cast(%15) {dtype=f64}
    %17: f32[8,16] = cast(%16) {dtype=f32}
    return %14, %17, %0
  })";

TEST(Pipeline, OptimizesAGraph) {
  ir::Graph g = ir_graph(kGraph);
  ir::Graph no_fusion = optimize(g, {.fuse = false});
  ir::verify(no_fusion);
  EXPECT_EQ(ir::to_text(no_fusion), canon(R"(
    graph(%0: f32[8,16], %1: f32[16,16], %2: f32[16]) {
      %3: f32[8,16] = tanh(%0)
      %4: f32[8,16] = add(%3, %3)
      %5: f32[8,16] = sub(%4, %2)
      %6: f32[8,16] = matmul(%5, %1)
      %7: f32[8,16] = exp(%6)
      %8: f32[8,16] = sigmoid(%7)
      %9: f32[8] = sum(%8) {axes=[1]}
      %10: f32[8,16] = log(%8)
      return %9, %10, %0
    })"));
  ir::Graph all = optimize(g, {});
  ir::verify(all);
  EXPECT_EQ(all.nodes().size(), 3u) << ir::to_text(all);  // fused, matmul, fused
  EXPECT_EQ(count_op(all, "fused"), 2);
  EXPECT_EQ(ir::to_text(optimize(g, {.simplify = false, .cse = false, .dce = false, .fuse = false})),
            ir::to_text(g));
}

const char* kSoftmaxGraph = R"(
  graph(%0: f32[4,8]) {
    %1: f32[4,1] = max(%0) {axes=[1], keepdim=true}
    %2: f32[4,8] = sub(%0, %1)
    %3: f32[4,8] = exp(%2)
    %4: f32[4,1] = sum(%3) {axes=[1], keepdim=true}
    %5: f32[4,8] = div(%3, %4)
    %6: f32[4,8] = exp(%2)
    %7: f32[] = full() {shape=[], value=0}
    %8: f32[4,8] = add(%6, %7)
    %9: f32[4,8] = neg(%8)
    %10: f32[4,8] = neg(%9)
    return %5, %10
  })";

// Without fusion the optimized graph runs on the same kernels as the
// original; fused nodes are run here by inlining their bodies.
std::vector<std::vector<float>> run_plain(const ir::Graph& g) {
  std::vector<std::vector<float>> out;
  for (const Tensor& t : run_graph(g, inputs_for(g), "pipeline test")) out.push_back(t.to_vector<float>());
  return out;
}

TEST(Pipeline, OptimizedGraphsGiveIdenticalResults) {
  for (const char* text : {kGraph, kSoftmaxGraph}) {
    ir::Graph g = ir_graph(text);
    EXPECT_EQ(run_plain(optimize(g, {.fuse = false})), run_plain(g)) << text;
  }
}

TEST(Pipeline, RandomGraphsGiveTheSameResults) {
  for (uint32_t seed = 1000; seed < 1150; ++seed) {
    ir::Graph g = random_graph(seed);
    auto want = evaluate(g);
    for (PassOptions o : {PassOptions{.fuse = false}, PassOptions{}}) {
      ir::Graph opt = optimize(g, o);
      ir::verify(opt);
      EXPECT_LE(opt.nodes().size(), g.nodes().size());
      EXPECT_TRUE(same_results(evaluate(opt), want)) << "seed " << seed << " " << to_string(o) << "\n"
                                                     << ir::to_text(g) << "\n" << ir::to_text(opt);
    }
  }
}

TEST(Pipeline, KeepsCollectivesAndTheirOrder) {
  for (uint32_t seed = 2000; seed < 2100; ++seed) {
    ir::Graph g = random_graph(seed, /*collectives=*/true);
    ir::Graph opt = optimize(g, {});
    ir::verify(opt);
    EXPECT_EQ(collective_order(opt), collective_order(g)) << "seed " << seed;
  }
}

// Close: a fused kernel may evaluate tanh, exp, ... with other (vectorised)
// code than the single-op kernels, and sums in another order.
::testing::AssertionResult close_results(const std::vector<std::vector<float>>& got,
                                         const std::vector<std::vector<float>>& want) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "output counts differ";
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[i].size() != want[i].size()) return ::testing::AssertionFailure() << "output " << i << " sizes differ";
    for (size_t k = 0; k < want[i].size(); ++k) {
      float a = got[i][k], b = want[i][k];
      if (std::isnan(a) && std::isnan(b)) continue;
      if (!(std::abs(a - b) <= 1e-5f + 1e-5f * std::abs(b)))
        return ::testing::AssertionFailure() << "output " << i << " element " << k << ": " << a << " vs " << b;
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(Pipeline, FusedGraphsGiveTheSameResults) {
  if (!find_kernel(DeviceKind::cpu, "fused")) GTEST_SKIP() << "no CPU kernel for 'fused' yet";
  for (const char* text : {kGraph, kSoftmaxGraph}) {
    ir::Graph g = ir_graph(text);
    EXPECT_TRUE(close_results(run_plain(optimize(g, {})), run_plain(g))) << text;
  }
  for (uint32_t seed = 3000; seed < 3100; ++seed) {
    ir::Graph g = random_graph(seed);
    ir::Graph opt = optimize(g, {});
    EXPECT_TRUE(close_results(run_plain(opt), run_plain(g))) << "seed " << seed << "\n" << ir::to_text(opt);
  }
}

}  // namespace
}  // namespace kiln::compiler::test
