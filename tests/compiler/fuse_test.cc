#include "kiln/compiler/fuse.h"

#include "kiln/base/error.h"
#include "kiln/compiler/fused_op.h"
#include "tests/compiler/pass_test_util.h"
#include "tests/compiler/random_graphs.h"

namespace kiln::compiler::test {
namespace {

// Fuses the graph in `text`, checks the result is valid and that every
// graph output kept its type.
ir::Graph fused(std::string_view text) {
  ir::Graph g = ir_graph(text);
  ir::Graph out = fuse(g);
  ir::verify(out);
  EXPECT_EQ(out.inputs().size(), g.inputs().size());
  EXPECT_EQ(out.outputs().size(), g.outputs().size());
  for (size_t i = 0; i < g.outputs().size() && i < out.outputs().size(); ++i)
    EXPECT_EQ(out.type(out.outputs()[i]), g.type(g.outputs()[i])) << "output " << i;
  return out;
}

std::string body_of(const ir::Node& n) { return ir::to_text(parse_fused_body(n.attrs.s("body"))); }

std::vector<std::string> ops_of(const ir::Graph& g) {
  std::vector<std::string> ops;
  for (const ir::Node& n : g.nodes()) ops.push_back(n.op->name);
  return ops;
}

TEST(Fuse, AChainOfEightElementwiseOpsBecomesOneNode) {
  const char* text = R"(
    graph(%0: f32[16], %1: f32[16]) {
      %2: f32[16] = exp(%0)
      %3: f32[16] = mul(%2, %1)
      %4: f32[16] = tanh(%3)
      %5: f32[16] = add(%4, %0)
      %6: f32[16] = sigmoid(%5)
      %7: f32[16] = sqrt(%6)
      %8: f32[16] = neg(%7)
      %9: f32[16] = abs(%8)
      return %9
    })";
  ir::Graph g = fused(text);
  ASSERT_EQ(g.nodes().size(), 1u) << ir::to_text(g);
  const ir::Node& f = g.nodes()[0];
  EXPECT_EQ(f.op->name, "fused");
  EXPECT_EQ(f.attrs.s("kind"), "elementwise");
  EXPECT_EQ(f.inputs, g.inputs());
  // The body is the whole chain, its inputs in order of first use.
  EXPECT_EQ(body_of(f), canon(text));
}

TEST(Fuse, AReductionWithItsElementwiseProducersBecomesOneNode) {
  // Inputs broadcast into the iteration space [4,8].
  const char* text = R"(
    graph(%0: f32[4,8], %1: f32[8]) {
      %2: f32[4,8] = sub(%0, %1)
      %3: f32[4,8] = square(%2)
      %4: f32[4] = mean(%3) {axes=[1]}
      return %4
    })";
  ir::Graph g = fused(text);
  ASSERT_EQ(g.nodes().size(), 1u) << ir::to_text(g);
  EXPECT_EQ(g.nodes()[0].attrs.s("kind"), "reduction");
  EXPECT_EQ(body_of(g.nodes()[0]), canon(text));
}

TEST(Fuse, ConstantsAreCopiedIntoTheBodyAtTheIterationShape) {
  ir::Graph g = fused(R"(
    graph(%0: f32[4,3]) {
      %1: f32[] = full() {shape=[], value=2}
      %2: f32[4,3] = mul(%0, %1)
      %3: f32[4,3] = exp(%2)
      return %3
    })");
  ASSERT_EQ(g.nodes().size(), 1u) << ir::to_text(g);
  EXPECT_EQ(g.nodes()[0].inputs.size(), 1u);
  EXPECT_EQ(body_of(g.nodes()[0]), canon(R"(
    graph(%0: f32[4,3]) {
      %1: f32[4,3] = full() {shape=[4,3], value=2}
      %2: f32[4,3] = mul(%0, %1)
      %3: f32[4,3] = exp(%2)
      return %3
    })"));
}

TEST(Fuse, AConstantAlsoReadOutsideTheGroupStays) {
  ir::Graph g = fused(R"(
    graph(%0: f32[3,3]) {
      %1: f32[3,3] = full() {shape=[3,3], value=2}
      %2: f32[3,3] = mul(%0, %1)
      %3: f32[3,3] = exp(%2)
      %4: f32[3,3] = matmul(%3, %1)
      return %4
    })");
  EXPECT_EQ(ops_of(g), (std::vector<std::string>{"full", "fused", "matmul"})) << ir::to_text(g);
  EXPECT_EQ(g.nodes()[1].inputs.size(), 1u);  // the body has its own copy
}

TEST(Fuse, SingletonGroupsStayUnfused) {
  std::string text = canon(R"(
    graph(%0: f32[4,4], %1: f32[4,4]) {
      %2: f32[] = full() {shape=[], value=3}
      %3: f32[4,4] = mul(%0, %2)
      %4: f32[4,4] = matmul(%3, %1)
      %5: f32[4] = sum(%4) {axes=[0]}
      %6: f32[4] = exp(%5)
      return %6
    })");
  EXPECT_EQ(run_pass(fuse, text), text);
}

TEST(Fuse, DoesNotCreateCycles) {
  // Fusing all four elementwise nodes would make the matmul both an input
  // and a consumer of the fused node.
  ir::Graph g = fused(R"(
    graph(%0: f32[4,4], %1: f32[4,4]) {
      %2: f32[4,4] = exp(%0)
      %3: f32[4,4] = neg(%2)
      %4: f32[4,4] = matmul(%3, %1)
      %5: f32[4,4] = add(%3, %4)
      %6: f32[4,4] = tanh(%5)
      return %6
    })");
  EXPECT_EQ(ops_of(g), (std::vector<std::string>{"fused", "matmul", "fused"})) << ir::to_text(g);
}

TEST(Fuse, DoesNotCreateCyclesBetweenGroups) {
  // The [4,8] group {exp, add, tanh, sum} reads neg; neg's [8] group must
  // then not take the final add, which reads the sum: the two groups would
  // each have to run before the other.
  ir::Graph g = fused(R"(
    graph(%0: f32[4,8], %1: f32[8]) {
      %2: f32[4,8] = exp(%0)
      %3: f32[8] = neg(%1)
      %4: f32[4,8] = add(%2, %3)
      %5: f32[4,8] = tanh(%2)
      %6: f32[8] = sum(%5) {axes=[0]}
      %7: f32[8] = add(%3, %6)
      return %7, %4
    })");
  EXPECT_EQ(ops_of(g), (std::vector<std::string>{"neg", "fused", "add"})) << ir::to_text(g);
  EXPECT_EQ(g.nodes()[1].attrs.s("kind"), "reduction");
}

TEST(Fuse, ElementwiseNodesNotReadingTheReductionJoinItsGroup) {
  ir::Graph g = fused(R"(
    graph(%0: f32[4,8]) {
      %1: f32[4,8] = exp(%0)
      %2: f32[4] = sum(%1) {axes=[1]}
      %3: f32[4,8] = neg(%1)
      %4: f32[4,8] = abs(%3)
      return %2, %4
    })");
  ASSERT_EQ(ops_of(g), (std::vector<std::string>{"fused"})) << ir::to_text(g);
  EXPECT_EQ(body_of(g.nodes()[0]), canon(R"(
    graph(%0: f32[4,8]) {
      %1: f32[4,8] = exp(%0)
      %2: f32[4,8] = neg(%1)
      %3: f32[4,8] = abs(%2)
      %4: f32[4] = sum(%1) {axes=[1]}
      return %3, %4
    })"));
  EXPECT_EQ(g.outputs(), (std::vector<ir::ValueId>{g.nodes()[0].outputs[1], g.nodes()[0].outputs[0]}));
}

TEST(Fuse, OutputsAreTheValuesUsedOutsideTheGroup) {
  ir::Graph g = fused(R"(
    graph(%0: f32[8], %1: f32[8,8]) {
      %2: f32[8] = exp(%0)
      %3: f32[8] = neg(%2)
      %4: f32[8] = abs(%3)
      %5: f32[8,8] = mul(%1, %3)
      %6: f32[8] = sum(%5) {axes=[0]}
      return %4, %2, %6
    })");
  ASSERT_EQ(ops_of(g), (std::vector<std::string>{"fused", "fused"})) << ir::to_text(g);
  // exp (returned), neg (read by the [8,8] group) and abs (returned), in node order.
  EXPECT_EQ(g.nodes()[0].outputs.size(), 3u);
  EXPECT_EQ(g.outputs()[0], g.nodes()[0].outputs[2]);
  EXPECT_EQ(g.outputs()[1], g.nodes()[0].outputs[0]);
  EXPECT_EQ(g.nodes()[1].inputs, (std::vector<ir::ValueId>{1, g.nodes()[0].outputs[1]}));
  EXPECT_EQ(g.nodes()[1].attrs.s("kind"), "reduction");
}

TEST(Fuse, AReductionEndsItsGroup) {
  // softmax: the division reads the sum, so it cannot join the sum's group.
  ir::Graph g = fused(R"(
    graph(%0: f32[4,3]) {
      %1: f32[4,3] = exp(%0)
      %2: f32[4,1] = sum(%1) {axes=[1], keepdim=true}
      %3: f32[4,3] = div(%1, %2)
      %4: f32[4,3] = mul(%3, %3)
      return %4
    })");
  ASSERT_EQ(ops_of(g), (std::vector<std::string>{"fused", "fused"})) << ir::to_text(g);
  EXPECT_EQ(g.nodes()[0].attrs.s("kind"), "reduction");
  EXPECT_EQ(g.nodes()[0].outputs.size(), 2u);  // exp and the sum
  EXPECT_EQ(g.nodes()[1].attrs.s("kind"), "elementwise");
  EXPECT_EQ(body_of(g.nodes()[0]), canon(R"(
    graph(%0: f32[4,3]) {
      %1: f32[4,3] = exp(%0)
      %2: f32[4,1] = sum(%1) {axes=[1], keepdim=true}
      return %1, %2
    })"));
}

TEST(Fuse, OnlySumMaxMinMeanAreFused) {
  std::string text = canon(R"(
    graph(%0: f32[4,3]) {
      %1: f32[4,3] = exp(%0)
      %2: f32[4,3] = softmax(%1) {axis=1}
      %3: f32[4,3] = neg(%0)
      %4: i64[4] = argmax(%3) {axis=1}
      return %2, %4
    })");
  EXPECT_EQ(run_pass(fuse, text), text);
}

TEST(Fuse, IndependentChainsMeetingInOneNodeMerge) {
  ir::Graph g = fused(R"(
    graph(%0: f32[8], %1: f32[8]) {
      %2: f32[8] = exp(%0)
      %3: f32[8] = neg(%2)
      %4: f32[8] = tanh(%1)
      %5: f32[8] = abs(%4)
      %6: f32[8] = add(%3, %5)
      return %6
    })");
  ASSERT_EQ(ops_of(g), (std::vector<std::string>{"fused"})) << ir::to_text(g);
  EXPECT_EQ(g.nodes()[0].inputs.size(), 2u);
}

TEST(Fuse, GroupsHaveOneIterationShape) {
  // exp is [3]; add broadcasts it to [4,3]: two spaces, so exp stays alone.
  ir::Graph g = fused(R"(
    graph(%0: f32[3], %1: f32[4,3]) {
      %2: f32[3] = exp(%0)
      %3: f32[4,3] = add(%2, %1)
      %4: f32[4,3] = neg(%3)
      return %4
    })");
  EXPECT_EQ(ops_of(g), (std::vector<std::string>{"exp", "fused"})) << ir::to_text(g);
}

TEST(Fuse, CollectivesKeepTheirOrder) {
  // Fusing exp with add would put the second all_reduce before the first.
  std::string text = canon(R"(
    graph(%0: f32[4], %1: f32[4]) {
      %2: f32[4] = exp(%0)
      %3: f32[4] = all_reduce(%2) {mesh_axis="dp", group_size=2}
      %4: f32[4] = all_reduce(%1) {mesh_axis="dp", group_size=2}
      %5: f32[4] = add(%2, %4)
      return %3, %5
    })");
  EXPECT_EQ(run_pass(fuse, text), text);
}

TEST(Fuse, CastsAndComparisonsFuseAndTypesArePreserved) {
  ir::Graph g = fused(R"(
    graph(%0: bf16[6], %1: f32[6]) {
      %2: f32[6] = cast(%0) {dtype=f32}
      %3: bool[6] = gt(%2, %1)
      %4: f32[6] = where(%3, %2, %1)
      %5: bf16[6] = cast(%4) {dtype=bf16}
      return %5, %3
    })");
  ASSERT_EQ(g.nodes().size(), 1u) << ir::to_text(g);
}

// Gradient clipping: the norm and the update both read the f32 widening of
// a bf16 gradient. Each group widens it itself; no f32 [64,32] is written.
TEST(Fuse, AWideningCastReadByTwoGroupsIsRecomputedInEach) {
  const char* text = R"(
    graph(%0: bf16[64,32], %1: f32[64,32]) {
      %2: f32[64,32] = cast(%0) {dtype=f32}
      %3: f32[64,32] = square(%2)
      %4: f32[] = sum(%3) {axes=[0,1]}
      %5: f32[] = sqrt(%4)
      %6: f32[64,32] = mul(%2, %5)
      %7: f32[64,32] = sub(%1, %6)
      return %7, %5
    })";
  ir::Graph g = fused(text);
  ASSERT_EQ(count_op(g, "fused"), 2) << ir::to_text(g);
  for (const ir::Node& n : g.nodes()) {
    if (n.op->name != "fused") continue;
    EXPECT_EQ(count_op(parse_fused_body(n.attrs.s("body")), "cast"), 1) << ir::to_text(g);
    EXPECT_EQ(n.inputs[0], g.inputs()[0]) << "each group reads the bf16 gradient\n" << ir::to_text(g);
  }
  EXPECT_EQ(g.type(g.nodes()[0].outputs[0]), (ir::TypeInfo{DType::f32, {}})) << ir::to_text(g);
  EXPECT_EQ(g.nodes()[0].outputs.size(), 1u) << ir::to_text(g);
  EXPECT_TRUE(same_results(evaluate(g), evaluate(ir_graph(text))));
}

// A widening cast stays one materialised value when a reader cannot fuse
// with it or it is returned; a narrowing one is never recomputed.
TEST(Fuse, OtherCastsAreWrittenOnce) {
  for (const char* text : {R"(
    graph(%0: bf16[8,8], %1: f32[8,8]) {
      %2: f32[8,8] = cast(%0) {dtype=f32}
      %3: f32[8,8] = matmul(%2, %1)
      %4: f32[8,8] = exp(%2)
      return %3, %4
    })", R"(
    graph(%0: bf16[8,8]) {
      %1: f32[8,8] = cast(%0) {dtype=f32}
      %2: f32[8] = sum(%1) {axes=[0]}
      %3: f32[8,8] = exp(%1)
      return %2, %3, %1
    })", R"(
    graph(%0: f32[8,8]) {
      %1: bf16[8,8] = cast(%0) {dtype=bf16}
      %2: bf16[8] = sum(%1) {axes=[0]}
      %3: bf16[8,8] = exp(%1)
      return %2, %3
    })"}) {
    ir::Graph g = fused(text);
    int casts = count_op(g, "cast");
    for (const ir::Node& n : g.nodes())
      if (n.op->name == "fused") casts += count_op(parse_fused_body(n.attrs.s("body")), "cast");
    EXPECT_EQ(casts, 1) << ir::to_text(g);
  }
}

TEST(Fuse, IsIdempotent) {
  ir::Graph once = fused(R"(
    graph(%0: f32[16]) {
      %1: f32[16] = exp(%0)
      %2: f32[16] = neg(%1)
      %3: f32[] = max(%2)
      return %3
    })");
  EXPECT_EQ(ir::to_text(fuse(once)), ir::to_text(once));
}

TEST(Fuse, RandomGraphsKeepTheirMeaning) {
  // Inlining the bodies back must compute exactly what the graph did.
  int fused_nodes = 0;
  for (uint32_t seed = 0; seed < 150; ++seed) {
    ir::Graph g = random_graph(seed);
    ir::verify(g);
    ir::Graph f = fuse(g);
    ir::verify(f);
    fused_nodes += count_op(f, "fused");
    EXPECT_TRUE(same_results(evaluate(f), evaluate(g))) << "seed " << seed << "\n" << ir::to_text(f);
  }
  EXPECT_GT(fused_nodes, 150);
}

TEST(Fuse, RandomGraphsKeepCollectivesInOrder) {
  for (uint32_t seed = 0; seed < 300; ++seed) {
    ir::Graph g = random_graph(seed, /*collectives=*/true, 60);
    ir::Graph f = fuse(g);
    ir::verify(f);
    EXPECT_EQ(collective_order(f), collective_order(g)) << "seed " << seed;
  }
}

TEST(Fuse, ScalesToLargeGraphs) {
  ir::Graph g = random_graph(7, /*collectives=*/true, 6000);
  ir::Graph f = fuse(g);
  ir::verify(f);
  EXPECT_LT(f.nodes().size(), g.nodes().size());
  // A chain of 20000 elementwise ops.
  ir::Graph chain;
  ir::ValueId v = chain.add_input({DType::f32, {8}});
  for (int i = 0; i < 20000; ++i) v = chain.add_node(ir::get_op(i % 2 ? "neg" : "tanh"), {v}, {}).outputs[0];
  chain.set_outputs({v});
  EXPECT_EQ(fuse(chain).nodes().size(), 1u);
}

TEST(FusedOp, TheShapeRuleChecksInputsAndKind) {
  std::string body = canon("graph(%0: f32[4]) {\n %1: f32[4] = exp(%0)\n return %1\n}");
  const ir::OpDef& op = fused_op();
  ir::Attrs attrs{{"body", body}, {"kind", std::string("elementwise")}};
  ir::TypeInfo f32_4{DType::f32, {4}}, f64_4{DType::f64, {4}};
  EXPECT_EQ(op.infer_types(std::vector{f32_4}, attrs), std::vector{f32_4});
  EXPECT_THROW(op.infer_types(std::vector{f64_4}, attrs), Error);
  EXPECT_THROW(op.infer_types(std::vector{f32_4, f32_4}, attrs), Error);
  ir::Attrs bad_kind{{"body", body}, {"kind", std::string("scan")}};
  EXPECT_THROW(op.infer_types(std::vector{f32_4}, bad_kind), Error);
  ir::Attrs not_reduction{{"body", body}, {"kind", std::string("reduction")}};
  EXPECT_THROW(op.infer_types(std::vector{f32_4}, not_reduction), Error);
  ir::Attrs opaque{{"body", canon("graph(%0: f32[4,4]) {\n %1: f32[4,4] = matmul(%0, %0)\n return %1\n}")},
                   {"kind", std::string("elementwise")}};
  EXPECT_THROW(op.infer_types(std::vector{ir::TypeInfo{DType::f32, {4, 4}}}, opaque), Error);
  ir::Attrs garbage{{"body", std::string("graph(")}, {"kind", std::string("elementwise")}};
  EXPECT_THROW(op.infer_types(std::vector{f32_4}, garbage), Error);
}

TEST(FusedOp, BodiesAreParsedOnce) {
  std::string body = canon("graph(%0: f32[2]) {\n %1: f32[2] = neg(%0)\n return %1\n}");
  EXPECT_EQ(fused_body(body).get(), fused_body(body).get());
  EXPECT_EQ(ir::to_text(parse_fused_body(body)), body);
}

TEST(FusedOp, AFusedGraphRoundTripsThroughText) {
  ir::Graph g = fused(R"(
    graph(%0: f32[16]) {
      %1: f32[16] = exp(%0)
      %2: f32[16] = neg(%1)
      return %2
    })");
  std::string text = ir::to_text(g);
  ir::Graph parsed = ir::parse_graph(text);
  ir::verify(parsed);
  EXPECT_EQ(ir::to_text(parsed), text);
}

}  // namespace
}  // namespace kiln::compiler::test
