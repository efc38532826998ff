#include "kiln/nn/moe.h"

#include "kiln/base/error.h"
#include "kiln/nn/token_dispatcher.h"
#include "kiln/ops/compute_dtype.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/matmul.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/topk.h"

namespace kiln::nn {

Experts::Experts(int64_t n_experts, int64_t dim, int64_t ffn_dim, DType dtype) {
  register_parameter("gate_up_proj", &gate_up_proj, zeros({n_experts, 2 * ffn_dim, dim}, dtype),
                     Init::normal);
  register_parameter("down_proj", &down_proj, zeros({n_experts, dim, ffn_dim}, dtype),
                     Init::normal);
}

Router::Router(int64_t n_experts, int64_t dim, DType dtype, bool bias) {
  register_parameter("weight", &weight, zeros({n_experts, dim}, dtype), Init::normal);
  if (bias)
    register_parameter("e_score_correction_bias", &e_score_correction_bias,
                       zeros({n_experts}, dtype), Init::zeros);
}

ComponentRegistry<ExpertsFn>& moe_impls() {
  static ComponentRegistry<ExpertsFn> r("moe");
  return r;
}

MoE::MoE(const MoEConfig& c, DType dtype)
    : config(c),
      experts(c.n_experts, c.dim, c.ffn_dim, dtype),
      gate(c.n_experts, c.dim, dtype, c.routing_bias),
      run_experts_(moe_impls().get(c.impl)),
      dispatcher_(local_dispatcher()) {
  KILN_CHECK(c.n_experts > 0 && c.top_k > 0 && c.top_k <= c.n_experts && c.ffn_dim > 0,
             "MoE: needs 0 < top_k <= n_experts and ffn_dim > 0; got top_k ", c.top_k,
             ", n_experts ", c.n_experts, ", ffn_dim ", c.ffn_dim);
  register_module("experts", &experts);
  register_module("gate", &gate);
}

void MoE::set_dispatcher(std::shared_ptr<const TokenDispatcher> d) {
  KILN_CHECK(d, "MoE: no token dispatcher");
  KILN_CHECK(config.impl != "composite" || d->describe() == "local",
             "MoE: moe_impl composite runs every expert on every token of this rank, so it "
             "cannot use the ", d->describe(), " token dispatcher; use --model.moe_impl grouped");
  dispatcher_ = std::move(d);
}

Routing MoE::route(const Tensor& x) const {
  Routing r;
  Tensor logits = matmul(x, gate.weight, false, true).to(ops::compute_dtype(x.dtype()));  // [T, E]
  r.probs = softmax(logits, -1);
  r.z_loss = mean(square(logsumexp(logits, {-1})));
  auto [weights, indices] = topk(r.probs, config.top_k, -1);
  if (gate.e_score_correction_bias.defined()) {
    Tensor biased = r.probs + gate.e_score_correction_bias.to(r.probs.dtype());
    indices = topk(biased, config.top_k, -1).second;
    weights = gather(r.probs, -1, indices);
  }
  if (config.norm_topk_prob) weights = weights / sum(weights, {-1}, true);
  r.weights = weights.to(x.dtype());
  r.indices = indices;
  Tensor flat = indices.reshape({-1});
  r.counts = scatter_add(zeros({config.n_experts}, DType::i64, x.device()), 0, flat,
                         ones_like(flat));
  return r;
}

Tensor MoE::forward(const Tensor& x, Routing* routing) const {
  const int64_t D = config.dim;
  KILN_CHECK(x.rank() >= 1 && x.dim(-1) == D, "MoE: input ", dtype_name(x.dtype()), x.shape(),
             " must end in dim ", D);
  Tensor xt = x.reshape({-1, D});
  Routing r = route(xt);
  Tensor out = run_experts_(*this, xt, r);
  if (routing) *routing = r;
  return out.reshape(x.shape());
}

Tensor load_balancing_loss(const std::vector<Routing>& layers, int64_t n_experts, int64_t top_k,
                           const MeanOverRanks& global_mean) {
  KILN_CHECK(!layers.empty(), "load_balancing_loss: no MoE layers");
  std::vector<Tensor> probs, indices;
  for (const Routing& r : layers) probs.push_back(r.probs), indices.push_back(r.indices);
  Tensor p = concat(probs, 0), idx = concat(indices, 0);  // [L*T, E], [L*T, k]
  KILN_CHECK(idx.dim(1) == top_k && p.dim(1) == n_experts, "load_balancing_loss: routing of ",
             idx.dim(1), " slots over ", p.dim(1), " experts, expected ", top_k, " and ",
             n_experts);
  Tensor tokens_per_expert = mean(one_hot(idx, n_experts, p.dtype()), {0});  // [k, E]
  Tensor prob_per_expert = mean(p, {0});                                     // [E]
  if (global_mean) {
    tokens_per_expert = global_mean(tokens_per_expert);
    prob_per_expert = global_mean(prob_per_expert);
  }
  return sum(tokens_per_expert * prob_per_expert) * double(n_experts);
}

}  // namespace kiln::nn
