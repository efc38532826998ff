#include "kiln/ir/graph.h"

#include <gtest/gtest.h>

#include "kiln/base/error.h"
#include "kiln/ir/fingerprint.h"

namespace kiln::ir {
namespace {

// A small graph touching several attribute kinds.
Graph sample(int64_t n = 4, int64_t slice_stop = 2, DType dt = DType::f32) {
  Graph g;
  ValueId x = g.add_input({dt, {n, 3}});
  ValueId y = g.add_input({dt, {3}});
  ValueId s = g.add_node(get_op("add"), {x, y}, {}).outputs[0];
  ValueId e = g.add_node(get_op("exp"), {s}, {}).outputs[0];
  ValueId t = g.add_node(get_op("permute"), {e}, {{"dims", IntList{1, 0}}}).outputs[0];
  ValueId sl = g.add_node(get_op("slice"), {t}, {{"axis", int64_t{1}}, {"start", int64_t{0}},
                                                  {"stop", slice_stop}, {"step", int64_t{2}}})
                   .outputs[0];
  ValueId c = g.add_node(get_op("cast"), {sl}, {{"dtype", DType::bf16}}).outputs[0];
  ValueId f = g.add_node(get_op("full"), {}, {{"shape", IntList{2}}, {"value", 0.1}}).outputs[0];
  g.set_outputs({c, f});
  return g;
}

TEST(GraphText, PrintsOneNodePerLineWithTypes) {
  std::string text = to_text(sample());
  EXPECT_NE(text.find("graph(%0: f32[4,3], %1: f32[3]) {"), std::string::npos) << text;
  EXPECT_NE(text.find("%2: f32[4,3] = add(%0, %1)"), std::string::npos) << text;
  EXPECT_NE(text.find("%4: f32[3,4] = permute(%3) {dims=[1,0]}"), std::string::npos) << text;
  EXPECT_NE(text.find("= cast(%5) {dtype=bf16}"), std::string::npos) << text;
  EXPECT_NE(text.find("return %6, %7"), std::string::npos) << text;
}

TEST(GraphText, ParserRoundTrips) {
  Graph g = sample();
  std::string text = to_text(g);
  Graph parsed = parse_graph(text);
  verify(parsed);
  EXPECT_EQ(to_text(parsed), text);
  EXPECT_EQ(fingerprint(parsed, {}), fingerprint(g, {}));
}

TEST(GraphText, FloatAttributesRoundTripExactly) {
  Graph g;
  ValueId f = g.add_node(get_op("full"), {}, {{"shape", IntList{1}}, {"value", 0.1 + 0.2}}).outputs[0];
  ValueId h = g.add_node(get_op("full"), {}, {{"shape", IntList{1}}, {"value", -1e300}}).outputs[0];
  g.set_outputs({f, h});
  Graph parsed = parse_graph(to_text(g));
  EXPECT_EQ(parsed.nodes()[0].attrs.f("value"), 0.1 + 0.2);
  EXPECT_EQ(parsed.nodes()[1].attrs.f("value"), -1e300);
}

TEST(GraphText, ParseErrorsNameLineAndColumn) {
  try {
    parse_graph("graph(%0: f32[2]) {\n  %1: f32[2] = nosuchop(%0)\n  return %1\n}\n");
    FAIL();
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("line 2"), std::string::npos) << m;
    EXPECT_NE(m.find("nosuchop"), std::string::npos) << m;
  }
  EXPECT_THROW(parse_graph("graph(%0: f32[2]) {\n  return %5\n}\n"), Error);
  EXPECT_THROW(parse_graph("graph(%0: f32[2]) {\n  %1: f32[2] = exp(%0)\n  %1: f32[2] = exp(%0)\n  return %1\n}"), Error);
}

TEST(GraphText, OmittedAttributesTakeDefaults) {
  Graph g = parse_graph("graph(%0: f32[4]) {\n  %1: f32[2] = slice(%0) {axis=0, start=0, stop=2}\n  return %1\n}\n");
  verify(g);
  EXPECT_EQ(g.nodes()[0].attrs.i("step"), 1);
}

TEST(Verifier, CatchesWrongRecordedTypes) {
  Graph g = parse_graph("graph(%0: f32[2,3]) {\n  %1: f32[3,3] = exp(%0)\n  return %1\n}\n");
  try {
    verify(g);
    FAIL();
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("shape rule gives f32[2,3]"), std::string::npos) << m;
  }
}

TEST(Verifier, CatchesUnknownAttributesAndArity) {
  EXPECT_THROW(parse_graph("graph(%0: f32[2]) {\n  %1: f32[2] = exp(%0) {bogus=1}\n  return %1\n}\n"), Error);
  Graph g = parse_graph("graph(%0: f32[2]) {\n  %1: f32[2] = add(%0)\n  return %1\n}\n");
  EXPECT_THROW(verify(g), Error);
}

TEST(Fingerprint, EqualGraphsEqualKeys) {
  EXPECT_EQ(fingerprint(sample(), {}), fingerprint(sample(), {}));
}

TEST(Fingerprint, ChangedAttributeChangesShapelessKey) {
  Fingerprint a = fingerprint(sample(4, 2), {}), b = fingerprint(sample(4, 3), {});
  EXPECT_NE(a.shapeless, b.shapeless);
}

TEST(Fingerprint, ChangedSizeChangesOnlyDimsKey) {
  Fingerprint a = fingerprint(sample(4), {}), b = fingerprint(sample(8), {});
  EXPECT_EQ(a.shapeless, b.shapeless);
  EXPECT_NE(a.dims, b.dims);
  EXPECT_EQ(a.options, b.options);
}

TEST(Fingerprint, ChangedDtypeChangesShapelessKey) {
  EXPECT_NE(fingerprint(sample(4, 2, DType::f32), {}).shapeless,
            fingerprint(sample(4, 2, DType::f64), {}).shapeless);
}

TEST(Fingerprint, OptionsKeyCoversBackendAndFlags) {
  Fingerprint a = fingerprint(sample(), {"cpu", ""});
  Fingerprint b = fingerprint(sample(), {"cuda", ""});
  Fingerprint c = fingerprint(sample(), {"cpu", "fuse=0"});
  EXPECT_EQ(a.shapeless, b.shapeless);
  EXPECT_NE(a.options, b.options);
  EXPECT_NE(a.options, c.options);
  EXPECT_EQ(to_string(a).size(), 48u);
}

TEST(OpRegistry, UnknownOpSuggestsNearest) {
  try {
    get_op("exq");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean"), std::string::npos) << e.what();
  }
}

TEST(OpRegistry, EveryOpIsCompletelyDeclared) {
  for (const OpDef* op : all_ops()) {
    EXPECT_FALSE(op->name.empty());
    EXPECT_TRUE(op->infer) << op->name << " has no shape rule";
  }
}

}  // namespace
}  // namespace kiln::ir
