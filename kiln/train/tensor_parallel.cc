#include "kiln/train/tensor_parallel.h"

#include "kiln/base/error.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/parallel_region.h"
#include "kiln/optim/clip.h"
#include "kiln/train/plan_parameters.h"

namespace kiln::train {
namespace {

Tensor squares(const std::vector<Tensor>& grads) {
  Tensor n = optim::global_norm(grads);
  return n * n;
}

}  // namespace

// By Hugging Face parameter name (the model's names, transformer.h).
TensorParallelPlan::Rule TensorParallelPlan::rule_for(const std::string& name) {
  for (const char* column : {".q_proj.", ".k_proj.", ".v_proj.", ".gate_proj.", ".up_proj."})
    if (name.find(column) != std::string::npos) return {0, false};
  for (const char* row : {".o_proj.weight", ".down_proj.weight"})
    if (name.ends_with(row)) return {1, false};
  for (const char* head_norm : {".q_norm.weight", ".k_norm.weight"})
    if (name.ends_with(head_norm)) return {-1, true};
  return {};
}

TensorParallelPlan::TensorParallelPlan(const dist::DeviceMesh& mesh, const ModelConfig& mc,
                                       std::vector<std::string> names)
    : names_(std::move(names)) {
  tp_.size = mesh.size("tp");
  rank_ = mesh.coordinate("tp");
  if (!enabled()) return;
  const std::string flag = cat("--parallelism.tensor_parallel_degree ", tp_.size);
  for (auto [what, n] : {std::pair{"n_heads", mc.n_heads},
                         {"n_kv_heads", mc.n_kv_heads},
                         {"ffn_dim (intermediate_size)", mc.ffn_dim}})
    KILN_CHECK(n % tp_.size == 0, flag, ": the model's ", what, " = ", n,
               " does not divide by it; pick a degree that divides n_heads (", mc.n_heads,
               "), n_kv_heads (", mc.n_kv_heads, ") and ffn_dim (", mc.ffn_dim, ")");
  for (const std::string& n : names_) rules_.push_back(rule_for(n));
}

void TensorParallelPlan::apply(CausalLM& model) const {
  if (!enabled()) return;
  auto params = plan_parameters(model, names_, "tensor parallelism");
  for (size_t i = 0; i < params.size(); ++i) *params[i].second = slice(*params[i].second, rules_[i]);
  // Per block: one region entry for attention's q/k/v and one for the
  // MLP's gate/up (their input's gradient is summed over tp once each), and
  // the row-parallel o_proj and down_proj leave (their partial products
  // summed before any bias): 2 all_reduces forward, 2 backward, as
  // Megatron-LM. The model only sees hooks.
  const MeshAxis axis = tp_;
  auto enter = [axis](const Tensor& x) { return enter_parallel_region(x, axis); };
  auto leave = [axis](const Tensor& y) { return leave_parallel_region(y, axis); };
  for (size_t l = 0; l < model.model.layers.size(); ++l) {
    TransformerBlock& b = model.model.layers[l];
    b.self_attn.input_hook = enter;
    b.self_attn.o_proj.product_hook = leave;
    if (b.mlp) {
      b.mlp->input_hook = enter;
      b.mlp->down_proj.product_hook = leave;
    }
  }
}

Tensor TensorParallelPlan::slice(const Tensor& full, const Rule& r) const {
  if (r.dim < 0) return full;
  const int64_t k = full.dim(r.dim) / tp_.size;
  return full.slice(r.dim, rank_ * k, (rank_ + 1) * k).contiguous();
}

std::vector<Tensor> TensorParallelPlan::shard(const std::vector<Tensor>& full) const {
  if (!enabled()) return full;
  KILN_CHECK(full.size() == rules_.size(), "tensor parallelism: ", full.size(),
             " tensors to shard, but the plan was made for ", rules_.size());
  std::vector<Tensor> out;
  for (size_t i = 0; i < full.size(); ++i) out.push_back(slice(full[i], rules_[i]));
  return out;
}

std::vector<Shape> TensorParallelPlan::local_shapes(std::vector<Shape> full) const {
  if (!enabled()) return full;
  for (size_t i = 0; i < full.size(); ++i)
    if (rules_[i].dim >= 0) full[i][size_t(rules_[i].dim)] /= tp_.size;
  return full;
}

std::vector<Tensor> TensorParallelPlan::unshard(const std::vector<Tensor>& local) const {
  if (!enabled()) return local;
  std::vector<Tensor> out;
  for (size_t i = 0; i < local.size(); ++i)
    out.push_back(rules_[i].dim < 0 ? local[i]
                                    : all_gather(local[i], rules_[i].dim, tp_).contiguous());
  return out;
}

std::vector<Tensor> TensorParallelPlan::reduce_grads(const std::vector<Tensor>& grads) const {
  if (!enabled()) return grads;
  std::vector<Tensor> out = grads;
  for (size_t i = 0; i < out.size(); ++i)
    if (rules_[i].partial_grad) out[i] = all_reduce(out[i], tp_);
  return out;
}

Tensor TensorParallelPlan::squared_norm(const std::vector<Tensor>& grads) const {
  if (!enabled()) return squares(grads);
  std::vector<Tensor> sliced, replicated;
  for (size_t i = 0; i < grads.size(); ++i)
    (rules_[i].dim >= 0 ? sliced : replicated).push_back(grads[i]);
  Tensor s = all_reduce(squares(sliced), tp_);
  return replicated.empty() ? s : s + squares(replicated);
}

}  // namespace kiln::train
