#include "kiln/compiler/cse.h"

#include "kiln/compiler/dce.h"
#include "tests/compiler/pass_test_util.h"

namespace kiln::compiler::test {
namespace {

TEST(Cse, MergesIdenticalNodesTransitively) {
  // Two exps merge, so the two negs of them merge too.
  std::string out = run_pass(cse, R"(
    graph(%0: f32[4]) {
      %1: f32[4] = exp(%0)
      %2: f32[4] = exp(%0)
      %3: f32[4] = neg(%1)
      %4: f32[4] = neg(%2)
      %5: f32[4] = add(%3, %4)
      return %5, %4
    })");
  EXPECT_EQ(out, canon(R"(
    graph(%0: f32[4]) {
      %1: f32[4] = exp(%0)
      %2: f32[4] = neg(%1)
      %3: f32[4] = add(%2, %2)
      return %3, %2
    })"));
}

TEST(Cse, AttributesAndOperandOrderMatter) {
  std::string text = canon(R"(
    graph(%0: f32[4,4], %1: f32[4,4]) {
      %2: f32[4] = sum(%0) {axes=[0]}
      %3: f32[4] = sum(%0) {axes=[1]}
      %4: f32[4,4] = sub(%0, %1)
      %5: f32[4,4] = sub(%1, %0)
      return %2, %3, %4, %5
    })");
  EXPECT_EQ(run_pass(cse, text), text);
}

TEST(Cse, DefaultedAndSpelledOutAttributesAreEqual) {
  std::string out = run_pass(cse, R"(
    graph(%0: f32[4,4]) {
      %1: f32[4] = sum(%0) {axes=[1]}
      %2: f32[4] = sum(%0) {axes=[1], keepdim=false}
      %3: f32[] = full() {shape=[], value=2}
      %4: f32[] = full() {shape=[], value=2.0, dtype=f32}
      return %1, %2, %3, %4
    })");
  EXPECT_EQ(out, canon(R"(
    graph(%0: f32[4,4]) {
      %1: f32[4] = sum(%0) {axes=[1]}
      %2: f32[] = full() {shape=[], value=2.0}
      return %1, %1, %2, %2
    })"));
}

TEST(Cse, NeverMergesSideEffectingNodes) {
  std::string text = canon(R"(
    graph(%0: f32[4]) {
      %1: f32[4] = all_reduce(%0) {mesh_axis="dp", group_size=2}
      %2: f32[4] = all_reduce(%0) {mesh_axis="dp", group_size=2}
      %3: f32[4] = add(%1, %2)
      return %3
    })");
  EXPECT_EQ(run_pass(cse, text), text);
}

TEST(Cse, MergesRandomOpsOnlyWithEqualSeedAndOffset) {
  // Random ops are pure functions of (seed, offset): equal attributes give
  // equal bits, so merging them is exact.
  std::string out = run_pass(cse, R"(
    graph() {
      %0: f32[8] = random_uniform() {shape=[8], seed=7, offset=0}
      %1: f32[8] = random_uniform() {shape=[8], seed=7, offset=0}
      %2: f32[8] = random_uniform() {shape=[8], seed=7, offset=8}
      return %0, %1, %2
    })");
  EXPECT_EQ(out, canon(R"(
    graph() {
      %0: f32[8] = random_uniform() {shape=[8], seed=7, offset=0}
      %1: f32[8] = random_uniform() {shape=[8], seed=7, offset=8}
      return %0, %0, %1
    })"));
}

TEST(Cse, MergesMultiOutputNodes) {
  std::string out = run_pass(cse, R"(
    graph(%0: f32[4]) {
      %1: f32[1], %2: f32[3] = split(%0) {sizes=[1,3]}
      %3: f32[1], %4: f32[3] = split(%0) {sizes=[1,3]}
      return %2, %4, %3
    })");
  EXPECT_EQ(out, canon(R"(
    graph(%0: f32[4]) {
      %1: f32[1], %2: f32[3] = split(%0) {sizes=[1,3]}
      return %2, %2, %1
    })"));
}

}  // namespace
}  // namespace kiln::compiler::test
