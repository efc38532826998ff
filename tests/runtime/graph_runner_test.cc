// Per-block compile: region tagging in traces and backward passes, segment
// extraction, and run_graph_compiling_regions giving run_graph's bits while
// identical blocks share one compiled program.
#include "kiln/runtime/graph_runner.h"

#include <gtest/gtest.h>

#include <set>

#include "kiln/autograd/grad.h"
#include "kiln/base/error.h"
#include "kiln/ir/fingerprint.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/matmul.h"
#include "kiln/ops/reduction.h"
#include "kiln/runtime/compile_cache.h"
#include "kiln/runtime/recording.h"
#include "kiln/ir/region.h"
#include "kiln/runtime/region.h"
#include "tests/support/gradcheck.h"

namespace kiln {
namespace {

using test::random_tensor;

constexpr int kLayers = 6;

// A residual stack: x <- x + silu(x w_l^T), each layer in its own region.
std::vector<Tensor> stack_loss(const std::vector<Tensor>& a) {
  Tensor x = a[0];
  for (int l = 0; l < kLayers; ++l) {
    RegionGuard region("layers." + std::to_string(l));
    x = x + silu(matmul(x, a[size_t(l) + 1], false, true));
  }
  return {sum(square(x))};
}

std::vector<Tensor> stack_args() {
  std::vector<Tensor> a{random_tensor({4, 16}, DType::f32, 1)};
  for (int l = 0; l < kLayers; ++l) a.push_back(random_tensor({16, 16}, DType::f32, 10 + l) * 0.3);
  return a;
}

std::shared_ptr<Recording> trace(const std::vector<Tensor>& args) {
  return test::trace_loss_and_grads(stack_loss, args);
}

TEST(Regions, TracedNodesAndTheirBackwardCarryTheRegion) {
  auto rec = trace(stack_args());
  const ir::Graph& g = rec->graph;
  std::set<std::string> seen;
  for (const ir::Node& n : g.nodes())
    if (n.region >= 0) seen.insert(g.region_name(n.region));
  for (int l = 0; l < kLayers; ++l) {
    std::string name = "layers." + std::to_string(l);
    EXPECT_TRUE(seen.count(name)) << name;
    EXPECT_TRUE(seen.count(ir::backward_region(name))) << name;
  }
  // The loss lies outside every region; the backward ends with layer 0's.
  const ir::Node* loss = nullptr;
  for (const ir::Node& n : g.nodes())
    if (!loss && n.op->name == "sum") loss = &n;  // the first: the forward's
  ASSERT_TRUE(loss);
  EXPECT_EQ(loss->region, -1);
  ASSERT_GE(g.nodes().back().region, 0);
  EXPECT_EQ(g.region_name(g.nodes().back().region), "layers.0.backward");
}

TEST(Regions, DoNotChangeFingerprints) {
  auto args = stack_args();
  auto tagged = trace(args);
  ir::Graph untagged = ir::parse_graph(ir::to_text(tagged->graph));
  EXPECT_EQ(ir::fingerprint(tagged->graph, {"cpu", ""}), ir::fingerprint(untagged, {"cpu", ""}));
}

TEST(ExtractSegment, InputsInFirstUseOrderOutputsThatEscape) {
  ir::Graph g = ir::parse_graph(R"(graph(%0: f32[3], %1: f32[3]) {
    %2: f32[3] = add(%0, %1)
    %3: f32[3] = mul(%2, %1)
    %4: f32[3] = exp(%3)
    %5: f32[3] = add(%4, %2)
    return %5
  })");
  RegionSegment s = extract_segment(g, 1, 3);  // mul, exp
  EXPECT_EQ(s.inputs, (std::vector<ir::ValueId>{2, 1}));
  EXPECT_EQ(s.outputs, (std::vector<ir::ValueId>{4}));  // %3 does not escape
  EXPECT_EQ(s.graph.nodes().size(), 2u);
  ir::verify(s.graph);
}

TEST(RunGraphCompilingRegions, SameBitsAsRunGraphAndOneProgramPerBlockShape) {
  auto args = stack_args();
  auto rec = trace(args);
  std::vector<Tensor> plain = run_graph(rec->graph, rec->captured, "stack");
  CompileCache::instance().reset_stats();
  std::vector<Tensor> blocks = run_graph_compiling_regions(rec->graph, rec->captured, "stack",
                                                           ProgramOptions{default_pass_options(), {}});
  ASSERT_EQ(plain.size(), blocks.size());
  for (size_t i = 0; i < plain.size(); ++i)
    EXPECT_EQ(plain[i].to_vector<float>(), blocks[i].to_vector<float>()) << "output " << i;
  // 2 * kLayers segments; the first and last layers of each direction may
  // differ in shape from the middle ones, every middle one is a cache hit.
  EXPECT_GE(CompileCache::instance().stats().l1.hits, 2 * kLayers - 4);
}

TEST(RunGraphCompilingRegions, ValueAndGradOption) {
  auto args = stack_args();
  GradOptions per_block;
  per_block.compile_regions = ProgramOptions{default_pass_options(), {}};
  ValueAndGrad a = value_and_grad(stack_loss)(args);
  ValueAndGrad b = value_and_grad(stack_loss, per_block)(args);
  EXPECT_EQ(a.values[0].item<float>(), b.values[0].item<float>());
  for (size_t i = 0; i < args.size(); ++i)
    EXPECT_EQ(a.grads[i].to_vector<float>(), b.grads[i].to_vector<float>()) << i;
}

}  // namespace
}  // namespace kiln
