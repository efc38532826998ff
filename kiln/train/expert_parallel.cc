#include "kiln/train/expert_parallel.h"

#include "kiln/base/error.h"
#include "kiln/train/plan_parameters.h"

namespace kiln::train {
namespace {

bool is_expert_name(const std::string& name) {
  return name.find(".mlp.experts.") != std::string::npos;
}

}  // namespace

ExpertParallelPlan::ExpertParallelPlan(const dist::DeviceMesh& mesh, const ModelConfig& mc,
                                       std::vector<std::string> names,
                                       const ExpertParallelOptions& options)
    : names_(std::move(names)) {
  ep_.size = mesh.size("ep");
  dp_.size = mesh.size("dp");
  rank_ = mesh.coordinate("ep");
  moe_ = mc.is_moe();
  const std::string flag = cat("--parallelism.expert_parallel_degree ", ep_.size);
  if (!moe_) {
    KILN_CHECK(ep_.size == 1, flag, ": ", mc.name, " is a dense model (no experts to split); "
               "set it to 1");
    return;
  }
  KILN_CHECK(mc.n_experts % ep_.size == 0, flag, ": the model's ", mc.n_experts,
             " experts do not divide over ", ep_.size, " ranks; pick a degree that divides ",
             mc.n_experts);
  const std::string kind = options.dispatcher == "auto"
                               ? (split() ? "all_to_all" : "local")
                               : options.dispatcher;
  dispatcher_ = nn::make_dispatcher(kind, ep_, options.capacity_factor);
  KILN_CHECK(mc.moe_impl != "composite" || kind == "local", flag, " with the ", kind,
             " token dispatcher: model.moe_impl composite runs every expert on every token, so "
             "it cannot; use --model.moe_impl grouped");
  for (const std::string& n : names_) expert_.push_back(is_expert_name(n));
}

std::string ExpertParallelPlan::describe() const {
  return dispatcher_ ? dispatcher_->describe() : std::string();
}

void ExpertParallelPlan::apply(CausalLM& model) const {
  if (!moe_) return;
  auto params = plan_parameters(model, names_, "expert parallelism");
  for (size_t i = 0; i < params.size(); ++i)
    if (split() && expert_[i]) *params[i].second = own_experts(*params[i].second);
  for (size_t l = 0; l < model.model.layers.size(); ++l)
    if (TransformerBlock& b = model.model.layers[l]; b.moe) b.moe->set_dispatcher(dispatcher_);
  // Every dp rank routes as many tokens: the mean of their means is the
  // global batch's.
  if (dp_.size > 1) {
    const MeshAxis dp = dp_;
    model.router_stats_mean = [dp](const Tensor& local) {
      return all_reduce(local, dp, ReduceOp::avg);
    };
  }
}

Tensor ExpertParallelPlan::own_experts(const Tensor& all) const {
  const int64_t k = all.dim(0) / ep_.size;
  return all.slice(0, rank_ * k, (rank_ + 1) * k).contiguous();
}

std::vector<Tensor> ExpertParallelPlan::shard(const std::vector<Tensor>& full) const {
  if (!split()) return full;
  KILN_CHECK(full.size() == expert_.size(), "expert parallelism: ", full.size(),
             " tensors to shard, but the plan was made for ", expert_.size());
  std::vector<Tensor> out;
  for (size_t i = 0; i < full.size(); ++i)
    out.push_back(is_expert(i) ? own_experts(full[i]) : full[i]);
  return out;
}

std::vector<Shape> ExpertParallelPlan::local_shapes(std::vector<Shape> full) const {
  if (!split()) return full;
  for (size_t i = 0; i < full.size(); ++i)
    if (is_expert(i)) full[i][0] /= ep_.size;
  return full;
}

std::vector<Tensor> ExpertParallelPlan::unshard(const std::vector<Tensor>& local) const {
  if (!split()) return local;
  std::vector<Tensor> out;
  for (size_t i = 0; i < local.size(); ++i)
    out.push_back(is_expert(i) ? all_gather(local[i], 0, ep_).contiguous() : local[i]);
  return out;
}

}  // namespace kiln::train
