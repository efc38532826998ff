#include "kiln/nn/moe.h"

#include "kiln/base/error.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/fused_kernels.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/matmul.h"
#include "kiln/ops/model.h"
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

Router::Router(int64_t n_experts, int64_t dim, DType dtype) {
  register_parameter("weight", &weight, zeros({n_experts, dim}, dtype), Init::normal);
}

MoE::MoE(const MoEConfig& c, DType dtype)
    : config(c), experts(c.n_experts, c.dim, c.ffn_dim, dtype), gate(c.n_experts, c.dim, dtype) {
  KILN_CHECK(c.n_experts > 0 && c.top_k > 0 && c.top_k <= c.n_experts && c.ffn_dim > 0,
             "MoE: needs 0 < top_k <= n_experts and ffn_dim > 0; got top_k ", c.top_k,
             ", n_experts ", c.n_experts, ", ffn_dim ", c.ffn_dim);
  KILN_CHECK(c.impl == "composite" || c.impl == "grouped", "MoE: impl '", c.impl,
             "' is not one of composite, grouped");
  register_module("experts", &experts);
  register_module("gate", &gate);
}

Routing MoE::route(const Tensor& x) const {
  Routing r;
  Tensor logits = matmul(x, gate.weight, false, true);  // [T, E]
  r.probs = softmax(logits.to(ops::compute_dtype(x.dtype())), -1);
  auto [weights, indices] = topk(r.probs, config.top_k, -1);
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
  Tensor out = config.impl == "grouped" ? grouped_experts(xt, r) : dense_experts(xt, r);
  if (routing) *routing = r;
  return out.reshape(x.shape());
}

// Every expert on every token: [E, T, *] intermediates, then the sum over
// experts weighted by a dense [T, E] routing matrix (zeros off the top-k).
Tensor MoE::dense_experts(const Tensor& x, const Routing& r) const {
  const int64_t F = config.ffn_dim;
  Tensor h = matmul(x.unsqueeze(0), experts.gate_up_proj, false, true);  // [E, T, 2F]
  std::vector<Tensor> gu = split(h, {F, F}, -1);
  Tensor y = matmul(silu_mul(gu[0], gu[1]), experts.down_proj, false, true);  // [E, T, D]
  Tensor dense = sum(one_hot(r.indices, config.n_experts, x.dtype()) * r.weights.unsqueeze(-1),
                     {1});                                                   // [T, E]
  return sum(y * dense.t().unsqueeze(-1), {0});
}

// Token-choice dispatch without host syncs (it must trace): the T * top_k
// (token, slot) assignments are sorted by expert with a stable topk, so
// each expert's rows are contiguous, then grouped_matmul runs all experts
// in one call per projection and index_add scatters the weighted rows back.
Tensor MoE::grouped_experts(const Tensor& x, const Routing& r) const {
  const int64_t T = x.dim(0), K = config.top_k, N = T * K, F = config.ffn_dim;
  Tensor expert_of = r.indices.reshape({N});
  // Ascending expert id; ties (same expert) keep assignment order.
  Tensor order = topk(neg(expert_of), N, 0).second;
  Tensor token_of = arange(0, double(T)).unsqueeze(1).expand({T, K}).reshape({N});
  Tensor token = index_select(token_of, 0, order);
  Tensor xs = index_select(x, 0, token);  // [N, D], grouped by expert
  Tensor h = grouped_matmul(xs, experts.gate_up_proj, r.counts);  // [N, 2F]
  std::vector<Tensor> gu = split(h, {F, F}, -1);
  Tensor y = grouped_matmul(silu_mul(gu[0], gu[1]), experts.down_proj, r.counts);  // [N, D]
  Tensor w = index_select(r.weights.reshape({N}), 0, order).unsqueeze(-1);
  return index_add(zeros_like(x), 0, token, y * w);
}

Tensor load_balancing_loss(const std::vector<Routing>& layers, int64_t n_experts, int64_t top_k) {
  KILN_CHECK(!layers.empty(), "load_balancing_loss: no MoE layers");
  std::vector<Tensor> probs, indices;
  for (const Routing& r : layers) probs.push_back(r.probs), indices.push_back(r.indices);
  Tensor p = concat(probs, 0), idx = concat(indices, 0);  // [L*T, E], [L*T, k]
  KILN_CHECK(idx.dim(1) == top_k && p.dim(1) == n_experts, "load_balancing_loss: routing of ",
             idx.dim(1), " slots over ", p.dim(1), " experts, expected ", top_k, " and ",
             n_experts);
  Tensor tokens_per_expert = mean(one_hot(idx, n_experts, p.dtype()), {0});  // [k, E]
  Tensor prob_per_expert = mean(p, {0});                                     // [E]
  return sum(tokens_per_expert * prob_per_expert) * double(n_experts);
}

}  // namespace kiln::nn
