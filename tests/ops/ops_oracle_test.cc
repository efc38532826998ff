// Replays the cases tests/oracle/gen_ops.py recorded from PyTorch
// (tests/support/op_cases.h): every op's outputs must match torch's, and for
// differentiable cases the gradients of loss = sum(out * cot) too, in every
// mode. The cases and their tolerances live in the generator.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "kiln/ir/op.h"
#include "tests/support/op_cases.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

using nlohmann::json;
using test::op_cases;

// Integer and bool results must be exact; floats within the case's tolerance.
::testing::AssertionResult matches(const Tensor& got, const Tensor& want, DType dtype,
                                   const json& tol) {
  if (got.dtype() != dtype)
    return ::testing::AssertionFailure() << "dtype " << dtype_name(got.dtype()) << ", expected "
                                         << dtype_name(dtype);
  if (!is_floating(dtype)) return test::all_close(got, want, 0, 0);
  return test::all_close(got, want, tol.at("rtol").get<double>(), tol.at("atol").get<double>());
}

// Same bits (NaN equal to NaN).
::testing::AssertionResult identical(const Tensor& a, const Tensor& b) {
  if (a.defined() != b.defined()) return ::testing::AssertionFailure() << "defined differs";
  if (!a.defined()) return ::testing::AssertionSuccess();
  std::vector<double> x = a.to_vector<double>(), y = b.to_vector<double>();
  if (a.type() != b.type() || x.size() != y.size())
    return ::testing::AssertionFailure() << ir::to_string(a.type()) << " vs " << ir::to_string(b.type());
  for (size_t i = 0; i < x.size(); ++i)
    if (!(x[i] == y[i] || (std::isnan(x[i]) && std::isnan(y[i]))))
      return ::testing::AssertionFailure() << "element " << i << ": " << x[i] << " vs " << y[i];
  return ::testing::AssertionSuccess();
}

bool all_finite(const std::vector<Tensor>& ts) {
  for (const Tensor& t : ts) {
    if (!t.defined() || !is_floating(t.dtype())) continue;
    for (double v : t.to_vector<double>())
      if (!std::isfinite(v)) return false;
  }
  return true;
}

class OpsOracle : public ::testing::TestWithParam<int> {};

TEST_P(OpsOracle, MatchesTorchInEveryMode) {
  const test::OpCases& data = op_cases();
  ASSERT_TRUE(data.error.empty()) << data.error;
  const test::OpCase oc = test::load_op_case(GetParam());
  const json& c = *oc.json;
  const std::string& name = oc.name;
  SCOPED_TRACE("oracle case " + name + " (op '" + oc.op->name + "')");
  const std::vector<Tensor>& inputs = oc.inputs;
  const json& expected = c.at("outputs");
  const json& grads = c.at("grads");

  // Strict mode against torch.
  test::ModeRun strict = test::run_op_case("strict", oc);
  ASSERT_EQ(strict.outs.size(), expected.size()) << name << ": number of outputs";
  for (size_t j = 0; j < strict.outs.size(); ++j) {
    const json& e = expected[j];
    DType dtype = parse_dtype(e.at("dtype").get<std::string>());
    EXPECT_TRUE(matches(strict.outs[j], data.file->get(e.at("name")), dtype, c.at("tol")))
        << name << ": output " << j;
  }
  for (const json& g : grads) {
    size_t i = g.at("input");
    ASSERT_TRUE(strict.grads.at(i).defined()) << name << ": no gradient for input " << i;
    EXPECT_TRUE(matches(strict.grads[i], data.file->get(g.at("name")), inputs[i].dtype(),
                        c.at("grad_tol")))
        << name << ": gradient of input " << i;
  }

  // Every other mode gives strict mode's bits: the same kernels run, and
  // fused kernels compute exactly as the unfused ones. Debug mode rejects
  // NaN/Inf by design, so it is skipped for cases that produce them.
  bool finite = all_finite(strict.outs) && all_finite(strict.grads);
  for (const char* mode : {"debug", "defer_and_fuse", "compile"}) {
    if (std::string(mode) == "debug" && !finite) continue;
    test::ModeRun other = test::run_op_case(mode, oc);
    for (size_t j = 0; j < strict.outs.size(); ++j)
      EXPECT_TRUE(identical(other.outs[j], strict.outs[j])) << mode << ": output " << j;
    for (size_t i = 0; i < strict.grads.size(); ++i)
      EXPECT_TRUE(identical(other.grads[i], strict.grads[i])) << mode << ": gradient " << i;
  }
}

// Every registered op has oracle cases or a stated reason not to.
TEST(OpsOracleCoverage, EveryOpHasCases) {
  const test::OpCases& data = op_cases();
  ASSERT_TRUE(data.error.empty()) << data.error;
  std::set<std::string> covered;
  for (const json& c : data.cases) covered.insert(c.at("op").get<std::string>());
  for (const ir::OpDef* op : ir::all_ops())
    EXPECT_TRUE(covered.count(op->name) || data.excluded.contains(op->name))
        << "op '" << op->name << "' has no oracle case: add cases to tests/oracle/gen_ops.py "
        << "or list it in EXCLUDED there with the reason";
  for (const auto& [name, why] : data.excluded.items())
    EXPECT_NE(ir::find_op(name), nullptr)
        << "EXCLUDED in gen_ops.py names op '" << name << "', which does not exist";
}

INSTANTIATE_TEST_SUITE_P(Torch, OpsOracle, ::testing::Range(0, test::op_case_count()),
                         test::op_case_name);

}  // namespace
}  // namespace kiln
