#include "tests/support/op_cases.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "kiln/autograd/grad.h"
#include "kiln/base/error.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/reduction.h"
#include "kiln/runtime/compile.h"
#include "kiln/runtime/context.h"
#include "kiln/runtime/defer.h"
#include "kiln/runtime/dispatch.h"

namespace kiln::test {

using nlohmann::json;

const OpCases& op_cases() {
  static const OpCases data = [] {
    OpCases d;
    const char* dir = std::getenv("KILN_ORACLE_DIR");
    if (!dir) {
      d.error = "KILN_ORACLE_DIR is not set: run this test through ctest, whose oracle_data "
                "test writes the reference file (tests/oracle/gen_ops.py, needs torch)";
      return d;
    }
    try {
      d.file = std::make_unique<SafeTensors>(std::string(dir) + "/ops.safetensors");
      d.cases = json::parse(d.file->metadata().at("cases").get<std::string>());
      d.excluded = json::parse(d.file->metadata().at("excluded").get<std::string>());
    } catch (const std::exception& e) {
      d.error = std::string("cannot load the oracle data: ") + e.what();
    }
    return d;
  }();
  return data;
}

int op_case_count() { return std::max<int>(1, int(op_cases().cases.size())); }

std::string op_case_name(const ::testing::TestParamInfo<int>& info) {
  const json& cases = op_cases().cases;
  if (cases.empty()) return "oracle_data_missing";
  std::string name = cases[info.param].at("name");
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return name;
}

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

OpCase load_op_case(int index, Device device) {
  const OpCases& data = op_cases();
  const json& c = data.cases.at(index);
  OpCase r;
  r.name = c.at("name");
  r.op = &ir::get_op(c.at("op").get<std::string>());
  r.attrs = attrs_from(c.at("attrs"));
  r.device = device;
  r.json = &c;
  auto on_device = [&](Tensor t) { return device == kCPU ? t : t.to(device); };
  for (const json& in : c.at("inputs")) {
    Tensor t = on_device(data.file->get(in.at("name")));
    r.inputs.push_back(in.at("transpose").get<bool>() ? t.transpose(-2, -1) : t);
  }
  if (r.with_grads())
    for (const json& e : c.at("outputs")) r.cots.push_back(on_device(data.file->get(e.at("cot"))));
  return r;
}

ModeRun run_op_case(const char* mode, const OpCase& c) {
  const ir::OpDef& op = *c.op;
  const bool with_grads = c.with_grads();
  auto step = [&](const std::vector<Tensor>& args) {
    std::vector<Tensor> out = apply(op, args, c.attrs, c.device);
    if (!with_grads) return out;
    auto vag = value_and_grad([&](const std::vector<Tensor>& a) {
      std::vector<Tensor> o = apply(op, a, c.attrs, c.device);
      Tensor loss;  // integer outputs (indices) carry no gradient
      for (size_t j = 0; j < o.size(); ++j) {
        if (!is_floating(o[j].dtype())) continue;
        Tensor term = sum(o[j] * c.cots[j]);
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
    std::vector<Tensor> kept = f(c.inputs);
    for (size_t i = 0, k = 0; i < defined.size(); ++i) all.push_back(defined[i] ? kept[k++] : Tensor());
  } else {
    EagerModeGuard guard(parse_eager_mode(m));
    size_t flushes = defer_stats().flushes;
    all = step(c.inputs);
    std::vector<Tensor> live;
    for (const Tensor& t : all)
      if (t.defined()) live.push_back(t);
    eval(live);
    if (m == "defer_and_fuse") {
      EXPECT_GT(defer_stats().flushes, flushes) << "nothing was deferred";
    }
  }
  size_t n_out = apply(op, c.inputs, c.attrs, c.device).size();
  ModeRun r;
  r.outs.assign(all.begin(), all.begin() + n_out);
  r.grads.assign(all.begin() + n_out, all.end());
  return r;
}

}  // namespace kiln::test
