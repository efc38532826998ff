// Replays the cases tests/oracle/gen_ops.py recorded from PyTorch: every op
// runs through kiln::apply on the recorded inputs and attributes, and its
// outputs must match torch's; for differentiable cases the gradients of
// loss = sum(out * cot) from value_and_grad must match torch's too. The
// reference file comes from the oracle_data ctest fixture, found through
// KILN_ORACLE_DIR. The cases and their tolerances live in the generator.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "kiln/autograd/grad.h"
#include "kiln/base/error.h"
#include "kiln/ir/op.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/reduction.h"
#include "kiln/runtime/dispatch.h"
#include "tests/support/safetensors_reader.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

using nlohmann::json;

struct OracleData {
  std::unique_ptr<test::SafeTensors> file;
  json cases = json::array();
  json excluded = json::object();  // op name -> why it has no cases
  std::string error;  // why the data could not be loaded
};

const OracleData& oracle() {
  static const OracleData data = [] {
    OracleData d;
    const char* dir = std::getenv("KILN_ORACLE_DIR");
    if (!dir) {
      d.error = "KILN_ORACLE_DIR is not set: run this test through ctest, whose oracle_data "
                "test writes the reference file (tests/oracle/gen_ops.py, needs torch)";
      return d;
    }
    try {
      d.file = std::make_unique<test::SafeTensors>(std::string(dir) + "/ops.safetensors");
      d.cases = json::parse(d.file->metadata().at("cases").get<std::string>());
      d.excluded = json::parse(d.file->metadata().at("excluded").get<std::string>());
    } catch (const std::exception& e) {
      d.error = std::string("cannot load the oracle data: ") + e.what();
    }
    return d;
  }();
  return data;
}

int case_count() { return std::max<int>(1, int(oracle().cases.size())); }

std::string case_name(const ::testing::TestParamInfo<int>& info) {
  const json& cases = oracle().cases;
  if (cases.empty()) return "oracle_data_missing";
  std::string name = cases[info.param].at("name");
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
}

// Attributes are stored as {"name": [kind, value]}.
ir::Attrs attrs_from(const json& j) {
  ir::Attrs a;
  for (const auto& [name, kv] : j.items()) {
    const std::string kind = kv.at(0);
    const json& v = kv.at(1);
    if (kind == "int") a.set(name, v.get<int64_t>());
    else if (kind == "float") a.set(name, v.get<double>());
    else if (kind == "bool") a.set(name, v.get<bool>());
    else if (kind == "string") a.set(name, v.get<std::string>());
    else if (kind == "ints") a.set(name, v.get<ir::IntList>());
    else if (kind == "dtype") a.set(name, parse_dtype(v.get<std::string>()));
    else fail("oracle data: attribute '", name, "' has unknown kind '", kind, "'");
  }
  return a;
}

// Integer and bool results must be exact; floats within the case's tolerance.
::testing::AssertionResult matches(const Tensor& got, const Tensor& want, DType dtype,
                                   const json& tol) {
  if (got.dtype() != dtype)
    return ::testing::AssertionFailure() << "dtype " << dtype_name(got.dtype()) << ", expected "
                                         << dtype_name(dtype);
  if (!is_floating(dtype)) return test::all_close(got, want, 0, 0);
  return test::all_close(got, want, tol.at("rtol").get<double>(), tol.at("atol").get<double>());
}

class OpsOracle : public ::testing::TestWithParam<int> {};

TEST_P(OpsOracle, MatchesTorch) {
  const OracleData& data = oracle();
  ASSERT_TRUE(data.error.empty()) << data.error;
  const json& c = data.cases.at(GetParam());
  const std::string name = c.at("name");
  SCOPED_TRACE("oracle case " + name + " (op '" + c.at("op").get<std::string>() + "')");

  const ir::OpDef& op = ir::get_op(c.at("op").get<std::string>());
  const ir::Attrs attrs = attrs_from(c.at("attrs"));
  std::vector<Tensor> inputs;
  for (const json& in : c.at("inputs")) {
    Tensor t = data.file->get(in.at("name"));
    inputs.push_back(in.at("transpose").get<bool>() ? t.transpose(-2, -1) : t);
  }

  std::vector<Tensor> outs = apply(op, inputs, attrs);
  const json& expected = c.at("outputs");
  ASSERT_EQ(outs.size(), expected.size()) << name << ": number of outputs";
  for (size_t j = 0; j < outs.size(); ++j) {
    const json& e = expected[j];
    DType dtype = parse_dtype(e.at("dtype").get<std::string>());
    EXPECT_TRUE(matches(outs[j], data.file->get(e.at("name")), dtype, c.at("tol")))
        << name << ": output " << j;
  }

  const json& grads = c.at("grads");
  if (grads.empty()) return;
  std::vector<Tensor> cots;
  for (const json& e : expected) cots.push_back(data.file->get(e.at("cot")));
  auto vag = value_and_grad([&](const std::vector<Tensor>& args) {
    std::vector<Tensor> o = apply(op, args, attrs);
    Tensor loss = sum(o[0] * cots[0]);
    for (size_t j = 1; j < o.size(); ++j) loss = loss + sum(o[j] * cots[j]);
    return std::vector<Tensor>{loss};
  });
  ValueAndGrad r = vag(inputs);
  for (const json& g : grads) {
    size_t i = g.at("input");
    ASSERT_TRUE(r.grads.at(i).defined()) << name << ": no gradient for input " << i;
    EXPECT_TRUE(matches(r.grads[i], data.file->get(g.at("name")), inputs[i].dtype(),
                        c.at("grad_tol")))
        << name << ": gradient of input " << i;
  }
}

// Every registered op has oracle cases or a stated reason not to.
TEST(OpsOracleCoverage, EveryOpHasCases) {
  const OracleData& data = oracle();
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

INSTANTIATE_TEST_SUITE_P(Torch, OpsOracle, ::testing::Range(0, case_count()), case_name);

}  // namespace
}  // namespace kiln
