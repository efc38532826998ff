#include "kiln/compiler/dce.h"

#include "tests/compiler/pass_test_util.h"

namespace kiln::compiler::test {
namespace {

TEST(Dce, DropsUnusedNodesAndRenumbers) {
  std::string out = run_pass(dce, R"(
    graph(%0: f32[4], %1: f32[4]) {
      %2: f32[4] = exp(%0)
      %3: f32[4] = log(%2)
      %4: f32[4] = add(%0, %1)
      %5: f32[4] = neg(%4)
      %6: f32[] = sum(%3)
      return %5
    })");
  EXPECT_EQ(out, canon(R"(
    graph(%0: f32[4], %1: f32[4]) {
      %2: f32[4] = add(%0, %1)
      %3: f32[4] = neg(%2)
      return %3
    })"));
}

// Passes copy nodes in their regions (autograd's recording is pruned with
// dce before remat and per-block compile read the regions).
TEST(Dce, KeptNodesStayInTheirRegions) {
  ir::Graph g;
  ir::ValueId x = g.add_input({DType::f32, {4}});
  ir::ValueId a = g.add_node(ir::get_op("exp"), {x}, {}).outputs[0];
  g.tag_last_node("layers.0");
  g.add_node(ir::get_op("neg"), {a}, {});  // dead
  g.tag_last_node("layers.0");
  ir::ValueId b = g.add_node(ir::get_op("log"), {a}, {}).outputs[0];
  g.tag_last_node("layers.1");
  ir::ValueId c = g.add_node(ir::get_op("abs"), {b}, {}).outputs[0];
  g.set_outputs({c});
  ir::Graph out = dce(g);
  ASSERT_EQ(out.nodes().size(), 3u);
  EXPECT_EQ(out.region_name(out.nodes()[0].region), "layers.0");
  EXPECT_EQ(out.region_name(out.nodes()[1].region), "layers.1");
  EXPECT_EQ(out.nodes()[2].region, -1);
}

TEST(Dce, KeepsUnusedGraphInputsAndOutputsThatAreInputs) {
  std::string text = canon(R"(
    graph(%0: f32[4], %1: f32[2]) {
      return %0, %0
    })");
  EXPECT_EQ(run_pass(dce, text), text);
}

TEST(Dce, KeepsSideEffectingNodesAndWhatTheyRead) {
  // The all_reduce's result is unused, but the exchange must still happen.
  std::string text = canon(R"(
    graph(%0: f32[4]) {
      %1: f32[4] = exp(%0)
      %2: f32[4] = all_reduce(%1) {mesh_axis="dp", group_size=2}
      %3: f32[4] = sqrt(%0)
      return %3
    })");
  EXPECT_EQ(run_pass(dce, text), text);
}

TEST(Dce, KeepsAMultiOutputNodeWhenOneOutputIsUsed) {
  std::string out = run_pass(dce, R"(
    graph(%0: f32[4]) {
      %1: f32[2], %2: f32[2] = split(%0) {sizes=[2,2]}
      %3: f32[2] = exp(%2)
      %4: f32[2] = neg(%1)
      return %3
    })");
  EXPECT_EQ(out, canon(R"(
    graph(%0: f32[4]) {
      %1: f32[2], %2: f32[2] = split(%0) {sizes=[2,2]}
      %3: f32[2] = exp(%2)
      return %3
    })"));
}

TEST(Dce, AnEmptyResultKeepsItsInputs) {
  EXPECT_EQ(run_pass(dce, "graph(%0: f32[3]) {\n %1: f32[3] = exp(%0)\n return\n}"),
            canon("graph(%0: f32[3]) {\n return\n}"));
}

}  // namespace
}  // namespace kiln::compiler::test
