// Replays the cases tests/oracle/gen_ops.py recorded from PyTorch: every op
// runs through kiln::apply on the recorded inputs and attributes, and its
// outputs must match torch's; for differentiable cases the gradients of
// loss = sum(out * cot) from value_and_grad must match torch's too. The
// reference file comes from the oracle_data ctest fixture, found through
// KILN_ORACLE_DIR. The cases and their tolerances live in the generator.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
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
#include "kiln/runtime/compile.h"
#include "kiln/runtime/context.h"
#include "kiln/runtime/defer.h"
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

// The same op run in every execution mode: its outputs, then the gradients
// of loss = sum(out * cot) when the case has them.
struct ModeRun {
  std::vector<Tensor> outs, grads;
};

ModeRun run_in_mode(const char* mode, const ir::OpDef& op, const std::vector<Tensor>& inputs,
                    const ir::Attrs& attrs, const std::vector<Tensor>& cots, bool with_grads) {
  auto step = [&](const std::vector<Tensor>& args) {
    std::vector<Tensor> out = apply(op, args, attrs);
    if (!with_grads) return out;
    auto vag = value_and_grad([&](const std::vector<Tensor>& a) {
      std::vector<Tensor> o = apply(op, a, attrs);
      Tensor loss;  // integer outputs (indices) carry no gradient
      for (size_t j = 0; j < o.size(); ++j) {
        if (!is_floating(o[j].dtype())) continue;
        Tensor term = sum(o[j] * cots[j]);
        loss = loss.defined() ? loss + term : term;
      }
      return std::vector<Tensor>{loss};
    });
    for (const Tensor& g : vag(args).grads) out.push_back(g.defined() ? g : Tensor());
    return out;
  };
  std::vector<Tensor> all;
  std::string m = mode;
  if (m == "compile") {
    // Undefined gradients (integer inputs) cannot be program outputs.
    std::vector<bool> defined;
    CompiledFunction f = compile([&](const std::vector<Tensor>& args) {
      std::vector<Tensor> r = step(args), kept;
      defined.clear();
      for (const Tensor& t : r) {
        defined.push_back(t.defined());
        if (t.defined()) kept.push_back(t);
      }
      return kept;
    });
    std::vector<Tensor> kept = f(inputs);
    for (size_t i = 0, k = 0; i < defined.size(); ++i) all.push_back(defined[i] ? kept[k++] : Tensor());
  } else {
    EagerModeGuard guard(parse_eager_mode(m));
    size_t flushes = defer_stats().flushes;
    all = step(inputs);
    std::vector<Tensor> live;
    for (const Tensor& t : all)
      if (t.defined()) live.push_back(t);
    eval(live);
    if (m == "defer_and_fuse") {
      EXPECT_GT(defer_stats().flushes, flushes) << "nothing was deferred";
    }
  }
  size_t n_out = apply(op, inputs, attrs).size();
  ModeRun r;
  r.outs.assign(all.begin(), all.begin() + n_out);
  r.grads.assign(all.begin() + n_out, all.end());
  return r;
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
  const json& expected = c.at("outputs");
  const json& grads = c.at("grads");
  std::vector<Tensor> cots;
  if (!grads.empty())
    for (const json& e : expected) cots.push_back(data.file->get(e.at("cot")));

  // Strict mode against torch.
  ModeRun strict = run_in_mode("strict", op, inputs, attrs, cots, !grads.empty());
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
    ModeRun other = run_in_mode(mode, op, inputs, attrs, cots, !grads.empty());
    for (size_t j = 0; j < strict.outs.size(); ++j)
      EXPECT_TRUE(identical(other.outs[j], strict.outs[j])) << mode << ": output " << j;
    for (size_t i = 0; i < strict.grads.size(); ++i)
      EXPECT_TRUE(identical(other.grads[i], strict.grads[i])) << mode << ": gradient " << i;
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
