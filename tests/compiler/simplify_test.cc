#include "kiln/compiler/simplify.h"

#include "tests/compiler/pass_test_util.h"

namespace kiln::compiler::test {
namespace {

// The graph `body` (lines between the header and return) over x: f32[4,3].
std::string over_x(const std::string& body, const std::string& ret) {
  return "graph(%0: f32[4,3]) {\n" + body + "\n  return " + ret + "\n}\n";
}

const std::string kIdentity = canon("graph(%0: f32[4,3]) {\n  return %0\n}");

TEST(Simplify, RemovesDoubleTransposes) {
  EXPECT_EQ(run_pass(simplify, over_x(R"(
      %1: f32[3,4] = permute(%0) {dims=[1,0]}
      %2: f32[4,3] = permute(%1) {dims=[1,0]})", "%2")),
            kIdentity);
  // Four in a row, with a negative axis: still the identity.
  EXPECT_EQ(run_pass(simplify, over_x(R"(
      %1: f32[3,4] = permute(%0) {dims=[1,0]}
      %2: f32[4,3] = permute(%1) {dims=[-1,0]}
      %3: f32[3,4] = permute(%2) {dims=[1,0]}
      %4: f32[4,3] = permute(%3) {dims=[1,0]})", "%4")),
            kIdentity);
}

TEST(Simplify, ComposesPermutes) {
  std::string out = run_pass(simplify, R"(
    graph(%0: f32[2,3,4]) {
      %1: f32[3,4,2] = permute(%0) {dims=[1,2,0]}
      %2: f32[2,4,3] = permute(%1) {dims=[2,1,0]}
      return %2
    })");
  EXPECT_EQ(out, canon(R"(
    graph(%0: f32[2,3,4]) {
      %1: f32[2,4,3] = permute(%0) {dims=[0,2,1]}
      return %1
    })"));
}

TEST(Simplify, KeepsAPermuteThatOnlyPreservesTheShape) {
  std::string text = canon(R"(
    graph(%0: f32[3,3]) {
      %1: f32[3,3] = permute(%0) {dims=[1,0]}
      return %1
    })");
  EXPECT_EQ(run_pass(simplify, text), text);
}

TEST(Simplify, RemovesIdentityOps) {
  EXPECT_EQ(run_pass(simplify, over_x(R"(
      %1: f32[4,3] = reshape(%0) {shape=[4,3]}
      %2: f32[4,3] = permute(%1) {dims=[0,1]}
      %3: f32[4,3] = expand(%2) {shape=[4,3]}
      %4: f32[4,3] = expand(%3) {shape=[-1,3]}
      %5: f32[4,3] = cast(%4) {dtype=f32}
      %6: f32[4,3] = slice(%5) {axis=1, start=0, stop=3}
      %7: f32[4,3] = slice(%6) {axis=0, start=-10, stop=100}
      %8: f32[4,3] = copy(%7))", "%8")),
            kIdentity);
}

TEST(Simplify, KeepsSlicesThatDropElements) {
  std::string text = canon(over_x(R"(
      %1: f32[2,3] = slice(%0) {axis=0, start=0, stop=4, step=2}
      %2: f32[4,2] = slice(%0) {axis=1, start=1, stop=3})", "%1, %2"));
  EXPECT_EQ(run_pass(simplify, text), text);
}

TEST(Simplify, CollapsesReshapeChains) {
  EXPECT_EQ(run_pass(simplify, over_x(R"(
      %1: f32[12] = reshape(%0) {shape=[12]}
      %2: f32[2,6] = reshape(%1) {shape=[2,6]}
      %3: f32[1,2,6] = unsqueeze(%2) {axis=0}
      %4: f32[3,4] = reshape(%3) {shape=[3,4]})", "%4")),
            canon(over_x("  %1: f32[3,4] = reshape(%0) {shape=[3,4]}", "%1")));
  // ... and drops them when they come back to x's shape.
  EXPECT_EQ(run_pass(simplify, over_x(R"(
      %1: f32[12] = reshape(%0) {shape=[12]}
      %2: f32[4,3] = reshape(%1) {shape=[4,3]})", "%2")),
            kIdentity);
}

TEST(Simplify, CancelsExactCastRoundTrips) {
  EXPECT_EQ(run_pass(simplify, over_x(R"(
      %1: f64[4,3] = cast(%0) {dtype=f64}
      %2: f32[4,3] = cast(%1) {dtype=f32})", "%2")),
            kIdentity);
  std::string bf16 = "graph(%0: bf16[5]) {\n  return %0\n}";
  EXPECT_EQ(run_pass(simplify, R"(
    graph(%0: bf16[5]) {
      %1: f32[5] = cast(%0) {dtype=f32}
      %2: bf16[5] = cast(%1) {dtype=bf16}
      return %2
    })"),
            canon(bf16));
}

TEST(Simplify, KeepsLossyCastRoundTrips) {
  // f32 -> bf16 rounds, so casting back does not restore x.
  std::string lossy = canon(over_x(R"(
      %1: bf16[4,3] = cast(%0) {dtype=bf16}
      %2: f32[4,3] = cast(%1) {dtype=f32})", "%2"));
  EXPECT_EQ(run_pass(simplify, lossy), lossy);
  std::string to_int = canon(over_x(R"(
      %1: i32[4,3] = cast(%0) {dtype=i32}
      %2: f32[4,3] = cast(%1) {dtype=f32})", "%2"));
  EXPECT_EQ(run_pass(simplify, to_int), to_int);
}

TEST(Simplify, DropsArithmeticWithUnitConstants) {
  EXPECT_EQ(run_pass(simplify, over_x(R"(
      %1: f32[] = full() {shape=[], value=1}
      %2: f32[] = full() {shape=[], value=0}
      %3: f32[4,3] = mul(%0, %1)
      %4: f32[4,3] = mul(%1, %3)
      %5: f32[4,3] = add(%4, %2)
      %6: f32[4,3] = add(%2, %5)
      %7: f32[4,3] = sub(%6, %2)
      %8: f32[4,3] = div(%7, %1))", "%8")),
            kIdentity);
  // A broadcast constant, and one seen through expand.
  EXPECT_EQ(run_pass(simplify, over_x(R"(
      %1: f32[1,3] = full() {shape=[1,3], value=1}
      %2: f32[4,3] = mul(%0, %1)
      %3: f32[] = full() {shape=[], value=0}
      %4: f32[4,3] = expand(%3) {shape=[4,3]}
      %5: f32[4,3] = add(%2, %4))", "%5")),
            kIdentity);
}

TEST(Simplify, KeepsArithmeticThatIsNotTheIdentity) {
  // 0 - x, x * 2, x / 0, and x * 1 where the constant broadcasts x.
  std::string text = canon(R"(
    graph(%0: f32[3], %1: f32[4,3]) {
      %2: f32[] = full() {shape=[], value=0}
      %3: f32[3] = sub(%2, %0)
      %4: f32[] = full() {shape=[], value=2}
      %5: f32[3] = mul(%0, %4)
      %6: f32[3] = div(%0, %2)
      %7: f32[4,3] = full() {shape=[4,3], value=1}
      %8: f32[4,3] = mul(%0, %7)
      %9: f32[4,3] = add(%1, %1)
      return %3, %5, %6, %8, %9
    })");
  EXPECT_EQ(run_pass(simplify, text), text);
}

TEST(Simplify, RemovesDoubleNegation) {
  EXPECT_EQ(run_pass(simplify, over_x(R"(
      %1: f32[4,3] = neg(%0)
      %2: f32[4,3] = neg(%1)
      %3: f32[4,3] = neg(%2))", "%3")),
            canon(over_x("  %1: f32[4,3] = neg(%0)", "%1")));
}

TEST(Simplify, ReachesAFixedPointAcrossRules) {
  // copy hides the double permute; mul by 1 hides the double negation.
  EXPECT_EQ(run_pass(simplify, over_x(R"(
      %1: f32[3,4] = permute(%0) {dims=[1,0]}
      %2: f32[3,4] = copy(%1)
      %3: f32[4,3] = permute(%2) {dims=[1,0]}
      %4: f32[4,3] = neg(%3)
      %5: f32[] = full() {shape=[], value=1}
      %6: f32[4,3] = mul(%4, %5)
      %7: f32[4,3] = neg(%6))", "%7, %3")),
            canon("graph(%0: f32[4,3]) {\n  return %0, %0\n}"));
}

TEST(Simplify, LeavesSideEffectingNodes) {
  std::string text = canon(over_x(R"(
      %1: f32[4,3] = all_reduce(%0) {mesh_axis="dp", group_size=2}
      %2: f32[4,3] = neg(%0))", "%2"));
  EXPECT_EQ(run_pass(simplify, text), text);
}

}  // namespace
}  // namespace kiln::compiler::test
