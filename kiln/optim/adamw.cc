#include "kiln/optim/adamw.h"

#include <cmath>
#include <utility>

#include "kiln/base/error.h"
#include "kiln/ops/elementwise.h"

namespace kiln::optim {
namespace {

void check_options(const AdamWOptions& o) {
  KILN_CHECK(o.beta1 >= 0 && o.beta1 < 1, "optimizer.beta1 must be in [0, 1), not ", o.beta1);
  KILN_CHECK(o.beta2 >= 0 && o.beta2 < 1, "optimizer.beta2 must be in [0, 1), not ", o.beta2);
  KILN_CHECK(o.eps >= 0, "optimizer.eps must be >= 0, not ", o.eps);
  KILN_CHECK(o.weight_decay >= 0, "optimizer.weight_decay must be >= 0, not ", o.weight_decay);
}

Tensor f32_scalar(double v, Device device) { return scalar(v, DType::f32, device); }

// The moments' dtype: f32, or f64 for f64 parameters (gradient checks).
DType state_dtype(DType param) { return param == DType::f64 ? DType::f64 : DType::f32; }

}  // namespace

ParamGroups default_param_groups(const std::vector<std::string>& names,
                                 const std::vector<Tensor>& params, double weight_decay,
                                 bool decay_norms_and_embeddings) {
  KILN_CHECK(names.size() == params.size(), "default_param_groups: ", names.size(),
             " names for ", params.size(), " parameters");
  ParamGroups g;
  g.groups = {{weight_decay, 1.0}, {0.0, 1.0}};
  for (size_t i = 0; i < params.size(); ++i) {
    bool skip = !decay_norms_and_embeddings &&
                (params[i].rank() < 2 || names[i].ends_with("embed_tokens.weight"));
    g.group.push_back(skip ? 1 : 0);
  }
  return g;
}

AdamW::AdamW(AdamWOptions options, size_t num_params)
    : AdamW(options, ParamGroups{{{options.weight_decay, 1.0}}, std::vector<int>(num_params, 0)}) {}

AdamW::AdamW(AdamWOptions options, ParamGroups groups)
    : options_(options), groups_(std::move(groups)) {
  check_options(options_);
  for (int g : groups_.group)
    KILN_CHECK(g >= 0 && size_t(g) < groups_.groups.size(), "AdamW: parameter group ", g,
               " does not exist (", groups_.groups.size(), " groups)");
}

AdamWState AdamW::init(const std::vector<Tensor>& params) const {
  KILN_CHECK(params.size() == groups_.group.size(), "AdamW: built for ", groups_.group.size(),
             " parameters, given ", params.size());
  AdamWState s;
  for (const auto& p : params) {
    s.m.push_back(zeros(p.shape(), state_dtype(p.dtype()), p.device()));
    s.v.push_back(zeros(p.shape(), state_dtype(p.dtype()), p.device()));
  }
  return s;
}

AdamWScalars AdamW::scalars(int64_t step, double lr, Device device) const {
  KILN_CHECK(step >= 1, "AdamW: update numbers start at 1, not ", step);
  // As torch.optim.AdamW: the bias corrections in double on the host.
  double bc1 = 1 - std::pow(options_.beta1, double(step));
  double bc2 = 1 - std::pow(options_.beta2, double(step));
  AdamWScalars s;
  s.bias_correction2_sqrt = f32_scalar(std::sqrt(bc2), device);
  for (const auto& g : groups_.groups) {
    double group_lr = lr * g.lr_scale;
    s.step_size.push_back(f32_scalar(group_lr / bc1, device));
    s.decay.push_back(f32_scalar(1 - group_lr * g.weight_decay, device));
  }
  return s;
}

AdamWUpdate AdamW::update(std::vector<Tensor> params, std::vector<Tensor> grads, AdamWState state,
                          const AdamWScalars& scalars) const {
  size_t n = groups_.group.size();
  KILN_CHECK(params.size() == n && grads.size() == n && state.m.size() == n && state.v.size() == n,
             "AdamW: built for ", n, " parameters, given ", params.size(), " parameters, ",
             grads.size(), " gradients and ", state.m.size(), " moments");
  KILN_CHECK(scalars.step_size.size() == groups_.groups.size() &&
                 scalars.decay.size() == groups_.groups.size(),
             "AdamW: scalars for ", scalars.step_size.size(), " groups, expected ",
             groups_.groups.size());
  const double b1 = options_.beta1, b2 = options_.beta2;
  AdamWUpdate out;
  out.state.step = state.step + 1;
  for (size_t i = 0; i < n; ++i) {
    KILN_CHECK(grads[i].defined(), "AdamW: parameter ", i, " has no gradient");
    KILN_CHECK(grads[i].shape() == params[i].shape(), "AdamW: gradient ", i, " has shape ",
               grads[i].shape(), " but its parameter ", params[i].shape());
    const DType pd = params[i].dtype(), sd = state_dtype(pd);
    auto cast = [&](const Tensor& t) { return t.dtype() == sd ? t : t.to(sd); };
    int group = groups_.group[i];
    Tensor decay = cast(scalars.decay[size_t(group)]);
    Tensor step_size = cast(scalars.step_size[size_t(group)]);
    Tensor bc2_sqrt = cast(scalars.bias_correction2_sqrt);
    // torch: p.mul_(1 - lr wd); m.lerp_(g, 1 - b1); v.mul_(b2).addcmul_(g, g, 1 - b2);
    // p.addcdiv_(m, v.sqrt() / bc2_sqrt + eps, -lr / bc1).
    // One op per statement: in eager mode every tensor, given up or
    // intermediate, is dropped once its last read is issued, so it goes
    // then, as a program's memory plan frees it (C++ would keep an
    // expression's temporaries to its end).
    Tensor g = cast(std::exchange(grads[i], Tensor()));
    Tensor m_old = std::exchange(state.m[i], Tensor());
    Tensor m = g - m_old;  // m_old + (g - m_old) (1 - b1)
    m = m * (1 - b1);
    m = m_old + m;
    m_old = Tensor();
    Tensor v = g * (1 - b2);  // v_old b2 + (g (1 - b2)) g
    v = v * g;
    g = Tensor();
    Tensor decayed = std::exchange(state.v[i], Tensor()) * b2;
    v = decayed + v;
    decayed = Tensor();
    Tensor step = sqrt(v);  // (step_size m) / (sqrt(v) / bc2_sqrt + eps)
    step = step / bc2_sqrt;
    step = step + options_.eps;
    step = (step_size * m) / step;
    Tensor updated = cast(std::exchange(params[i], Tensor())) * decay;  // p decay - step
    updated = updated - step;
    step = Tensor();
    out.params.push_back(updated.dtype() == pd ? updated : updated.to(pd));
    out.state.m.push_back(m);
    out.state.v.push_back(v);
  }
  return out;
}

AdamWUpdate AdamW::update(std::vector<Tensor> params, std::vector<Tensor> grads, AdamWState state,
                          double lr) const {
  const AdamWScalars s = scalars(state.step + 1, lr, params.empty() ? kCPU : params[0].device());
  return update(std::move(params), std::move(grads), std::move(state), s);
}

NamedTensors adamw_state_tensors(const AdamWState& state, const std::vector<std::string>& names,
                                 const std::string& prefix) {
  KILN_CHECK(names.size() == state.m.size(), "adamw_state_tensors: ", names.size(),
             " names for ", state.m.size(), " moments");
  NamedTensors out;
  for (size_t i = 0; i < names.size(); ++i) out.emplace_back(prefix + "m." + names[i], state.m[i]);
  for (size_t i = 0; i < names.size(); ++i) out.emplace_back(prefix + "v." + names[i], state.v[i]);
  return out;
}

AdamWState adamw_state_from_tensors(const std::map<std::string, Tensor>& tensors, int64_t step,
                                    const std::vector<std::string>& names,
                                    const std::vector<Tensor>& params, const std::string& prefix) {
  KILN_CHECK(names.size() == params.size(), "adamw_state_from_tensors: ", names.size(),
             " names for ", params.size(), " parameters");
  AdamWState s;
  s.step = step;
  std::string missing;
  int n_missing = 0;
  auto get = [&](const std::string& key, const Tensor& p) -> Tensor {
    auto it = tensors.find(key);
    if (it == tensors.end()) {
      if (n_missing++ < 3) missing += (missing.empty() ? "" : ", ") + key;
      return {};
    }
    KILN_CHECK(it->second.shape() == p.shape(), "optimizer state '", key, "' has shape ",
               it->second.shape(), " but the parameter has ", p.shape());
    DType sd = state_dtype(p.dtype());
    const Tensor& t = it->second;
    return (t.dtype() == sd ? t : t.to(sd)).to(p.device());  // the parameter's device
  };
  for (size_t i = 0; i < names.size(); ++i) {
    s.m.push_back(get(prefix + "m." + names[i], params[i]));
    s.v.push_back(get(prefix + "v." + names[i], params[i]));
  }
  KILN_CHECK(n_missing == 0, "the optimizer state lacks ", n_missing, " tensors (", missing,
             n_missing > 3 ? ", ..." : "", "): was it saved for another model?");
  return s;
}

nlohmann::json adamw_state_json(const AdamWState& state, const AdamWOptions& options) {
  return {{"name", "AdamW"},         {"step", state.step},
          {"beta1", options.beta1},  {"beta2", options.beta2},
          {"eps", options.eps},      {"weight_decay", options.weight_decay}};
}

}  // namespace kiln::optim
