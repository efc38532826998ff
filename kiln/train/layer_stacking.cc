#include "kiln/train/layer_stacking.h"

#include "kiln/base/error.h"
#include "kiln/optim/clip.h"
#include "kiln/ops/shape.h"
#include "kiln/runtime/context.h"

namespace kiln::train {
namespace {

// "<prefix>layers.<l>.<rest>" -> (l, rest); nullopt for other names.
std::optional<std::pair<size_t, std::string>> layer_of(const std::string& name) {
  static const std::string key = "layers.";
  size_t at = name.rfind(key);
  if (at == std::string::npos || (at > 0 && name[at - 1] != '.')) return std::nullopt;
  size_t digits = at + key.size(), end = digits;
  while (end < name.size() && std::isdigit(static_cast<unsigned char>(name[end]))) ++end;
  if (end == digits || end >= name.size() || name[end] != '.') return std::nullopt;
  return std::make_pair(size_t(std::stoul(name.substr(digits, end - digits))),
                        name.substr(end + 1));
}

// The stack whose consecutive dim-0 slices `views` are, if they are (as
// unstack hands them out); an undefined tensor otherwise.
Tensor stack_of_views(const std::vector<Tensor>& views) {
  const Tensor& v0 = views[0];
  if (!v0.impl().materialized() || !v0.is_contiguous()) return {};
  const int64_t n = v0.numel();
  for (size_t l = 0; l < views.size(); ++l) {
    const TensorImpl& v = views[l].impl();
    if (!views[l].is_contiguous() || v.storage != v0.impl().storage || v.dtype != v0.dtype() ||
        v.shape != v0.shape() || v.offset != v0.impl().offset + int64_t(l) * n)
      return {};
  }
  auto impl = std::make_shared<TensorImpl>(v0.impl());
  impl->shape.insert(0, int64_t(views.size()));
  impl->strides = contiguous_strides(impl->shape);
  return Tensor(std::move(impl));
}

}  // namespace

std::optional<LayerStacking> LayerStacking::plan(const std::vector<std::string>& names,
                                                 const std::vector<ir::TypeInfo>& types,
                                                 const optim::ParamGroups& groups) {
  LayerStacking s;
  s.total_ = names.size();
  while (s.first_ < names.size() && !layer_of(names[s.first_])) ++s.first_;
  if (s.first_ == names.size()) return std::nullopt;
  size_t end = s.first_;
  while (end < names.size() && layer_of(names[end])) ++end;
  for (size_t i = end; i < names.size(); ++i)
    if (layer_of(names[i])) return std::nullopt;  // the layers are not one run
  while (s.first_ + s.kinds_ < end && layer_of(names[s.first_ + s.kinds_])->first == 0) ++s.kinds_;
  if ((end - s.first_) % s.kinds_ != 0) return std::nullopt;
  s.layers_ = (end - s.first_) / s.kinds_;
  for (size_t l = 0; l < s.layers_; ++l)
    for (size_t k = 0; k < s.kinds_; ++k) {
      size_t i = s.first_ + l * s.kinds_ + k, i0 = s.first_ + k;
      auto [layer, rest] = *layer_of(names[i]);
      if (layer != l || rest != layer_of(names[i0])->second || !(types[i] == types[i0]) ||
          groups.group[i] != groups.group[i0])
        return std::nullopt;
    }
  return s;
}

std::vector<Tensor> LayerStacking::stack(const std::vector<Tensor>& per_param,
                                         bool* copied) const {
  KILN_CHECK(per_param.size() == total_, "layer stacking: ", per_param.size(),
             " tensors for ", total_, " parameters");
  std::vector<Tensor> out(per_param.begin(), per_param.begin() + long(first_));
  for (size_t k = 0; k < kinds_; ++k) {
    std::vector<Tensor> layers;
    for (size_t l = 0; l < layers_; ++l) layers.push_back(per_param[first_ + l * kinds_ + k]);
    Tensor views = stack_of_views(layers);
    if (views.defined()) {
      out.push_back(views);
      continue;
    }
    out.push_back(kiln::stack(layers));
    if (copied) *copied = true;
  }
  out.insert(out.end(), per_param.begin() + long(first_ + layers_ * kinds_), per_param.end());
  return out;
}

std::vector<ir::TypeInfo> LayerStacking::stack(const std::vector<ir::TypeInfo>& per_param) const {
  std::vector<ir::TypeInfo> out(per_param.begin(), per_param.begin() + long(first_));
  for (size_t k = 0; k < kinds_; ++k) {
    ir::TypeInfo t = per_param[first_ + k];
    t.shape.insert(0, int64_t(layers_));
    out.push_back(t);
  }
  out.insert(out.end(), per_param.begin() + long(first_ + layers_ * kinds_), per_param.end());
  return out;
}

std::vector<Tensor> LayerStacking::unstack(const std::vector<Tensor>& stacked) const {
  KILN_CHECK(stacked.size() == size(), "layer stacking: ", stacked.size(), " stacked tensors, expected ",
             size());
  // Views of the materialized stacks (metadata only), which stack() recognises.
  EagerModeGuard strict(EagerMode::strict);
  std::vector<Tensor> out(stacked.begin(), stacked.begin() + long(first_));
  for (size_t l = 0; l < layers_; ++l)
    for (size_t k = 0; k < kinds_; ++k) out.push_back(stacked[first_ + k].select(0, int64_t(l)));
  out.insert(out.end(), stacked.begin() + long(first_ + kinds_), stacked.end());
  return out;
}

optim::ParamGroups LayerStacking::groups(const optim::ParamGroups& per_param) const {
  optim::ParamGroups g{per_param.groups, {}};
  const auto& pg = per_param.group;
  g.group.assign(pg.begin(), pg.begin() + long(first_));
  for (size_t k = 0; k < kinds_; ++k) g.group.push_back(pg[first_ + k]);
  g.group.insert(g.group.end(), pg.begin() + long(first_ + layers_ * kinds_), pg.end());
  return g;
}

std::vector<Tensor> LayerStacking::scope_values(const std::vector<Tensor>& stacked) const {
  std::vector<Tensor> out(stacked.begin(), stacked.begin() + long(first_));
  out.resize(first_ + layers_ * kinds_);  // the layers: unset
  out.insert(out.end(), stacked.begin() + long(first_ + kinds_), stacked.end());
  return out;
}

std::vector<Tensor> LayerStacking::layer_stacks(const std::vector<Tensor>& stacked) const {
  return {stacked.begin() + long(first_), stacked.begin() + long(first_ + kinds_)};
}

Tensor LayerStacking::global_norm(const std::vector<Tensor>& stacked_grads) const {
  const DType dt = optim::norm_dtype(stacked_grads);
  std::vector<Tensor> norms;
  for (size_t i = 0; i < first_; ++i) norms.push_back(optim::slice_norms(stacked_grads[i], dt));
  // Per stack [L] norms -> [L, kinds] -> layer-major, the parameters' order.
  std::vector<Tensor> columns;
  for (size_t k = 0; k < kinds_; ++k)
    columns.push_back(optim::slice_norms(stacked_grads[first_ + k], dt, 1).reshape({-1, 1}));
  norms.push_back(concat(columns, 1).reshape({-1}));
  for (size_t i = first_ + kinds_; i < stacked_grads.size(); ++i)
    norms.push_back(optim::slice_norms(stacked_grads[i], dt));
  return optim::norm_of_norms(norms);
}

}  // namespace kiln::train
