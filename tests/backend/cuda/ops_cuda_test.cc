// The op oracle suite on CUDA: every case of tests/oracle/gen_ops.py
// (tests/support/op_cases.h) runs in strict mode with its inputs on cuda:0,
// forward and every gradient, and must match the same case run by kiln on
// the CPU within the table below. Outputs must stay on the device (kiln
// never silently copies to the host). Ops without a CUDA kernel run their
// composite there and are checked the same way.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "kiln/runtime/kernel.h"
#include "tests/support/op_cases.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

constexpr Device kGPU{DeviceKind::cuda, 0};

// CUDA against the CPU, per dtype: |cuda - cpu| <= atol + rtol * |cpu|.
// Integers and bools are exact. Floats differ where the two devices'
// transcendental functions do (CUDA's expf within 2 ulp, the CPU's own f32
// exp within 1; log, cos, tanh likewise) and where cuBLASLt and oneDNN sum
// a dot product in different orders; 16-bit results can then round to the
// neighbouring value, and a gradient chain can carry that a few ops on.
struct Tolerance {
  double rtol, atol;
};
Tolerance tolerance(DType t) {
  switch (t) {
    case DType::f64: return {1e-12, 1e-12};
    case DType::f32: return {1e-5, 1e-5};
    case DType::f16: return {4e-3, 2e-3};   // ~8 ulp (2^-11 relative)
    case DType::bf16: return {3e-2, 2e-2};  // ~4 ulp (2^-8 relative)
    default: return {0, 0};
  }
}

::testing::AssertionResult matches_cpu(const Tensor& gpu, const Tensor& cpu) {
  if (gpu.defined() != cpu.defined())
    return ::testing::AssertionFailure() << "defined on one device only";
  if (!gpu.defined()) return ::testing::AssertionSuccess();
  if (gpu.device() != kGPU)
    return ::testing::AssertionFailure() << "result is on " << to_string(gpu.device())
                                         << ", not " << to_string(kGPU);
  if (gpu.dtype() != cpu.dtype())
    return ::testing::AssertionFailure() << "dtype " << dtype_name(gpu.dtype()) << ", the CPU's "
                                         << dtype_name(cpu.dtype());
  Tolerance tol = tolerance(cpu.dtype());
  return test::all_close(gpu.to(kCPU), cpu, tol.rtol, tol.atol);
}

class OpsCuda : public ::testing::TestWithParam<int> {};

TEST_P(OpsCuda, MatchesCpu) {
  const test::OpCases& data = test::op_cases();
  ASSERT_TRUE(data.error.empty()) << data.error;
  const test::OpCase on_cpu = test::load_op_case(GetParam(), kCPU);
  const test::OpCase on_gpu = test::load_op_case(GetParam(), kGPU);
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
