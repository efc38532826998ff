// Graph split (kiln/runtime/segmented_program.h): a function of a layered
// model's forward and backward compiled as separate programs per group of
// layers gives the bits of one program, its segments follow the layers'
// regions, and the programs of middle groups are shared: how many distinct
// programs there are, and the size of the largest, do not grow with depth.
#include <gtest/gtest.h>

#include <set>

#include "kiln/autograd/grad.h"
#include "kiln/ir/region.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/matmul.h"
#include "kiln/ops/reduction.h"
#include "kiln/runtime/compile.h"
#include "kiln/runtime/executable.h"
#include "kiln/runtime/recording.h"
#include "kiln/runtime/region.h"
#include "kiln/runtime/segmented_program.h"
#include "tests/support/gradcheck.h"

namespace kiln {
namespace {

using test::random_tensor;

// A residual MLP stack of `layers` blocks, one region per block, with a
// loss outside the blocks; a[0] is the input, a[1..] the blocks' weights.
TensorFn stack_loss(int layers) {
  return [layers](const std::vector<Tensor>& a) {
    Tensor x = a[0] * 0.5;  // outside any block, as an embedding is
    for (int l = 0; l < layers; ++l) {
      RegionGuard region("layers." + std::to_string(l));
      Tensor h = matmul(x, a[size_t(l) + 1], false, true);
      x = x + matmul(silu(h) * tanh(h), a[size_t(l) + 1]) * 0.1;
    }
    return std::vector<Tensor>{sum(square(x))};
  };
}

std::vector<Tensor> stack_args(int layers) {
  std::vector<Tensor> a{random_tensor({16, 32}, DType::f32, 1)};
  for (int l = 0; l < layers; ++l) a.push_back(random_tensor({32, 32}, DType::f32, 10 + l) * (1.0 / 32));
  return a;
}

// The loss and every gradient, compiled with `split` (nullopt: one program).
CompiledFunction compiled(int layers, std::optional<int64_t> split) {
  CompileOptions o;
  o.graph_split = split;
  return compile(
      [layers](const std::vector<Tensor>& a) {
        ValueAndGrad r = value_and_grad(stack_loss(layers))(a);
        std::vector<Tensor> out{r.values[0]};
        out.insert(out.end(), r.grads.begin(), r.grads.end());
        return out;
      },
      o);
}

std::vector<std::vector<float>> values(const std::vector<Tensor>& ts) {
  std::vector<std::vector<float>> v;
  for (const Tensor& t : ts) v.push_back(t.to_vector<float>());
  return v;
}

TEST(GraphSplit, SameBitsAsOneProgram) {
  const int layers = 4;
  auto args = stack_args(layers);
  CompiledFunction whole = compiled(layers, std::nullopt);
  const auto expect = values(whole(args));
  EXPECT_EQ(whole.last_programs().size(), 1u);
  for (int64_t per_group : {0, 1, 2, 3}) {
    CompiledFunction split = compiled(layers, per_group);
    EXPECT_EQ(values(split(args)), expect) << per_group << " layers per group";
    EXPECT_GT(split.last_programs().size(), 1u) << per_group;
  }
}

// Forward groups in order, the loss apart, backward groups in reverse.
TEST(GraphSplit, SegmentsFollowTheLayerGroups) {
  auto rec = test::trace_loss_and_grads(stack_loss(4), stack_args(4));
  const ir::Graph& g = rec->graph;
  auto describe = [&](const NodeRanges& ranges) {
    std::vector<std::string> out;
    for (auto [begin, end] : ranges) {
      std::set<std::string> regions;
      for (size_t i = begin; i < end; ++i)
        regions.insert(g.nodes()[i].region < 0 ? "-" : g.region_name(g.nodes()[i].region));
      std::string s;
      for (const std::string& r : regions) s += (s.empty() ? "" : " ") + r;
      out.push_back(s);
    }
    return out;
  };
  EXPECT_EQ(describe(split_at_layer_groups(g, 2)),
            (std::vector<std::string>{"-", "layers.0 layers.1", "layers.2 layers.3", "-",
                                      "layers.2.backward layers.3.backward",
                                      "layers.0.backward layers.1.backward", "-"}));
  EXPECT_EQ(describe(split_at_layer_groups(g, 0)),
            (std::vector<std::string>{"-", "layers.0 layers.1 layers.2 layers.3", "-",
                                      "layers.0.backward layers.1.backward layers.2.backward "
                                      "layers.3.backward",
                                      "-"}));
  // Cutting by two splits keeps every cut of each.
  EXPECT_EQ(cut_both({{0, 4}, {4, 10}}, {{0, 2}, {2, 10}}),
            (NodeRanges{{0, 2}, {2, 4}, {4, 10}}));
}

TEST(GraphSplit, ProgramsDoNotGrowWithDepth) {
  struct Shape {
    size_t distinct = 0, largest = 0;
  };
  auto shape = [](int layers) {
    CompiledFunction f = compiled(layers, 1);
    f(stack_args(layers));
    std::set<const Executable*> distinct;
    Shape s;
    for (const Executable* p : f.last_programs()) {
      distinct.insert(p);
      s.largest = std::max(s.largest, p->stats().launches);
    }
    s.distinct = distinct.size();
    return s;
  };
  const Shape four = shape(4), twelve = shape(12);
  EXPECT_EQ(four.distinct, twelve.distinct);
  EXPECT_EQ(four.largest, twelve.largest);
  // One program, by contrast, grows with every layer.
  auto whole = [](int layers) {
    CompiledFunction f = compiled(layers, std::nullopt);
    f(stack_args(layers));
    return f.last_executable().stats().launches;
  };
  EXPECT_GT(whole(12), whole(4));
  std::cout << "distinct programs " << four.distinct << ", largest " << four.largest
            << " launches at 4 and 12 layers\n";
}

TEST(GraphSplit, LayerNumbersOfRegions) {
  EXPECT_EQ(ir::region_index("layers.3"), 3);
  EXPECT_EQ(ir::region_index("layers.12.backward"), 12);
  EXPECT_EQ(ir::region_index("model.layers.7"), 7);
  EXPECT_EQ(ir::region_index("embedding"), -1);
  EXPECT_EQ(ir::region_index("layers.x"), -1);
  EXPECT_EQ(ir::region_index("layers."), -1);
}

}  // namespace
}  // namespace kiln
