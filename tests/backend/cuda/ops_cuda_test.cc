// The op oracle suite on CUDA: every case of tests/oracle/gen_ops.py
// (tests/support/op_cases.h) runs in strict mode with its inputs on cuda:0,
// forward and every gradient, and must match the same case run by kiln on
// the CPU within the one CUDA tolerance table (against_cpu.h). Outputs must stay on the device (kiln
// never silently copies to the host). Ops without a CUDA kernel run their
// composite there and are checked the same way.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "kiln/runtime/kernel.h"
#include "tests/backend/cuda/against_cpu.h"
#include "tests/support/op_cases.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

using test::kCuda0;
using test::matches_cpu;

class OpsCuda : public ::testing::TestWithParam<int> {};

TEST_P(OpsCuda, MatchesCpu) {
  const test::OpCases& data = test::op_cases();
  ASSERT_TRUE(data.error.empty()) << data.error;
  const test::OpCase on_cpu = test::load_op_case(GetParam(), kCPU);
  const test::OpCase on_gpu = test::load_op_case(GetParam(), kCuda0);
  SCOPED_TRACE("oracle case " + on_cpu.name + " (op '" + on_cpu.op->name + "')");
  test::ModeRun want = test::run_op_case("strict", on_cpu);
  test::ModeRun got = test::run_op_case("strict", on_gpu);
  ASSERT_EQ(got.outs.size(), want.outs.size());
  ASSERT_EQ(got.grads.size(), want.grads.size());
  for (size_t j = 0; j < want.outs.size(); ++j)
    EXPECT_TRUE(matches_cpu(got.outs[j], want.outs[j])) << "output " << j;
  for (size_t i = 0; i < want.grads.size(); ++i)
    EXPECT_TRUE(matches_cpu(got.grads[i], want.grads[i])) << "gradient of input " << i;
}

// Every op of the data has a CUDA kernel or a composite to run there.
TEST(OpsCudaCoverage, EveryOpRunsOnCuda) {
  const test::OpCases& data = test::op_cases();
  ASSERT_TRUE(data.error.empty()) << data.error;
  std::set<std::string> ops;
  for (const auto& c : data.cases) ops.insert(c.at("op").get<std::string>());
  for (const std::string& name : ops)
    EXPECT_TRUE(find_kernel(DeviceKind::cuda, name) || ir::get_op(name).composite)
        << "op '" << name << "' has neither a CUDA kernel nor a composite";
}

INSTANTIATE_TEST_SUITE_P(Oracle, OpsCuda, ::testing::Range(0, test::op_case_count()),
                         test::op_case_name);

}  // namespace
}  // namespace kiln
