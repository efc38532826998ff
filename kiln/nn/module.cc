#include "kiln/nn/module.h"

#include <set>

#include "kiln/base/error.h"

namespace kiln::nn {

template <class Visit>
void Module::visit(const std::string& prefix, Visit&& f) const {
  for (const Param& p : params_) f(prefix + p.name, p);
  for (const auto& [name, child] : children_) child->visit(prefix + name + ".", f);
}

std::vector<std::pair<std::string, Tensor*>> Module::named_parameters() {
  std::vector<std::pair<std::string, Tensor*>> out;
  visit("", [&](const std::string& name, const Param& p) { out.emplace_back(name, p.slot); });
  return out;
}

std::vector<std::pair<std::string, const Tensor*>> Module::named_parameters() const {
  std::vector<std::pair<std::string, const Tensor*>> out;
  visit("", [&](const std::string& name, const Param& p) { out.emplace_back(name, p.slot); });
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  visit("", [&](const std::string&, const Param& p) { out.push_back(*p.slot); });
  return out;
}

void Module::set_parameters(const std::vector<Tensor>& values, bool allow_unset) {
  auto named = named_parameters();
  KILN_CHECK(values.size() == named.size(), "set_parameters: the module has ", named.size(),
             " parameters but ", values.size(), " values were given");
  for (size_t i = 0; i < named.size(); ++i) {
    const Tensor& v = values[i];
    const Tensor& p = *named[i].second;
    if ((allow_unset && !v.defined()) || (v.defined() && !p.defined())) continue;
    KILN_CHECK(v.defined() && v.shape() == p.shape() && v.dtype() == p.dtype(),
               "set_parameters: value ", i, " for '", named[i].first, "' is ",
               v.defined() ? cat(dtype_name(v.dtype()), v.shape()) : std::string("undefined"),
               " but the parameter is ", dtype_name(p.dtype()), p.shape());
  }
  for (size_t i = 0; i < named.size(); ++i) *named[i].second = values[i];
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  visit("", [&](const std::string&, const Param& p) { n += p.slot->numel(); });
  return n;
}

StateDict Module::state_dict() const {
  StateDict out;
  visit("", [&](const std::string& name, const Param& p) { out.emplace(name, *p.slot); });
  return out;
}

void Module::load_state_dict(const StateDict& dict, bool strict) {
  auto named = named_parameters();
  std::vector<std::string> missing, unexpected, mismatched;
  std::set<std::string> known;
  for (auto& [name, slot] : named) {
    known.insert(name);
    auto it = dict.find(name);
    if (it == dict.end()) {
      missing.push_back(name);
    } else if (!it->second.defined() || it->second.shape() != slot->shape()) {
      mismatched.push_back(cat(name, ": expected ", slot->shape(), ", got ",
                               it->second.defined() ? cat(it->second.shape()) : "undefined"));
    }
  }
  for (const auto& [name, value] : dict)
    if (!known.count(name)) unexpected.push_back(name);

  // Long lists are cut: a wrong model shows the pattern in a few entries.
  auto list = [](const std::vector<std::string>& v) {
    std::string s;
    const size_t shown = 8;
    for (size_t i = 0; i < v.size() && i < shown; ++i) s += cat("\n    ", v[i]);
    if (v.size() > shown) s += cat("\n    ... and ", v.size() - shown, " more");
    return s;
  };
  std::string problems;
  if (!mismatched.empty())
    problems += cat("\n  ", mismatched.size(), " with the wrong shape:", list(mismatched));
  if (strict && !missing.empty())
    problems += cat("\n  ", missing.size(), " missing (the module has them, the dict does not):",
                    list(missing));
  if (strict && !unexpected.empty())
    problems += cat("\n  ", unexpected.size(),
                    " unexpected (in the dict, not in the module):", list(unexpected));
  KILN_CHECK(problems.empty(), "load_state_dict: the state dict does not fit the module (",
             named.size(), " parameters, ", dict.size(), " entries):", problems,
             "\n  check that the checkpoint is for this model config");

  for (auto& [name, slot] : named) {
    auto it = dict.find(name);
    if (it != dict.end()) slot->copy_(it->second);
  }
}

void Module::init_parameters(Generator& g, double std) {
  visit("", [&](const std::string&, const Param& p) {
    Tensor& t = *p.slot;
    switch (p.init) {
      case Init::normal: t = normal(t.shape(), 0, std, g, t.dtype(), t.device()); break;
      case Init::zeros: t = zeros(t.shape(), t.dtype(), t.device()); break;
      case Init::ones: t = ones(t.shape(), t.dtype(), t.device()); break;
    }
  });
}

void Module::register_parameter(std::string name, Tensor* slot, Tensor value, Init init) {
  KILN_CHECK(name.find('.') == std::string::npos, "register_parameter: name '", name,
             "' must not contain '.'");
  *slot = std::move(value);
  params_.push_back({std::move(name), slot, init});
}

void Module::set_init(const std::string& name, Init init) {
  for (Param& p : params_)
    if (p.name == name) {
      p.init = init;
      return;
    }
  fail("set_init: the module has no parameter '", name, "' of its own");
}

void Module::register_module(std::string name, Module* child) {
  KILN_CHECK(name.find('.') == std::string::npos, "register_module: name '", name,
             "' must not contain '.'");
  children_.emplace_back(std::move(name), child);
}

ParameterScope::ParameterScope(Module& module, const std::vector<Tensor>& values,
                               bool allow_unset)
    : module_(module), saved_(module.parameters()) {
  module.set_parameters(values, allow_unset);
}

ParameterScope::~ParameterScope() {
  auto named = module_.named_parameters();  // the same tree: sizes match
  for (size_t i = 0; i < named.size(); ++i) *named[i].second = std::move(saved_[i]);
}

ValueAndGrad value_and_grad(Module& module, const std::function<std::vector<Tensor>()>& fn) {
  auto vg = kiln::value_and_grad([&](const std::vector<Tensor>& params) {
    ParameterScope scope(module, params);
    return fn();
  });
  return vg(module.parameters());
}

}  // namespace kiln::nn
