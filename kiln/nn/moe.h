// Qwen3-MoE's sparse MoE block (HF Qwen3MoeSparseMoeBlock): a router picks
// top_k of n_experts SwiGLU experts per token from softmax scores, the
// chosen weights optionally renormalised to sum to 1, and the token's output
// is the weighted sum of its experts' outputs. Parameter names and layouts
// follow transformers >= 5: "gate.weight" [E, dim] (the router),
// "experts.gate_up_proj" [E, 2 * ffn, dim] (gate rows then up rows) and
// "experts.down_proj" [E, dim, ffn]. (Hub checkpoints store each expert as
// experts.{e}.{gate,up,down}_proj.weight; loaders stack them.)
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "kiln/nn/component_registry.h"
#include "kiln/nn/module.h"

namespace kiln::nn {

struct MoEConfig {
  int64_t dim = 0, n_experts = 0, top_k = 0, ffn_dim = 0;
  bool norm_topk_prob = true;
  std::string impl = "composite";  // how the experts run: a moe_impls() name
  // A per-expert bias the router adds to its scores to choose the top-k
  // (the weights stay the unbiased scores'): DeepSeek-V3's
  // auxiliary-loss-free balancing, "gate.e_score_correction_bias" [E].
  bool routing_bias = false;
};

// What the router decided for a batch of T tokens.
struct Routing {
  Tensor probs;    // [T, E] f32 (f64 for f64) softmax of the router logits
  Tensor indices;  // [T, top_k] i64, chosen experts, highest score first
  Tensor weights;  // [T, top_k] in x's dtype (renormalised if norm_topk_prob)
  Tensor counts;   // [E] i64, tokens routed to each expert (sums to T * top_k)
  Tensor dropped;  // i64 scalar: assignments the token dispatcher dropped (capacity)
  Tensor z_loss;   // scalar of probs' dtype: mean over tokens of logsumexp(router logits)^2
};

class Experts : public Module {
 public:
  Experts(int64_t n_experts, int64_t dim, int64_t ffn_dim, DType dtype);
  Tensor gate_up_proj, down_proj;
};

class Router : public Module {
 public:
  Router(int64_t n_experts, int64_t dim, DType dtype, bool bias);
  Tensor weight;  // [E, dim]
  Tensor e_score_correction_bias;  // [E], zeros at init; undefined without a routing bias
};

class MoE;
class TokenDispatcher;

// The experts' part of the block: x [T, dim] and the router's decisions ->
// [T, dim], the sum of each token's top_k experts' outputs weighted by
// r.weights; sets r.dropped. Implementations: kiln/nn/components/moe_*.cc.
using ExpertsFn = std::function<Tensor(const MoE& moe, const Tensor& x, Routing& r)>;
ComponentRegistry<ExpertsFn>& moe_impls();

class MoE : public Module {
 public:
  MoE(const MoEConfig& config, DType dtype = DType::f32);

  // x [..., dim] -> [..., dim]; `routing`, when given, receives the router's
  // decisions (for the load-balancing loss and expert metrics).
  Tensor forward(const Tensor& x, Routing* routing = nullptr) const;
  // The router alone, for x [T, dim].
  Routing route(const Tensor& x) const;

  // How tokens reach the experts (token_dispatcher.h): local until a
  // parallelism plan sets another, after slicing `experts` to this rank's.
  const TokenDispatcher& dispatcher() const { return *dispatcher_; }
  void set_dispatcher(std::shared_ptr<const TokenDispatcher> d);

  MoEConfig config;
  Experts experts;  // "experts.*", registered first as in HF
  Router gate;      // "gate.weight"

 private:
  ExpertsFn run_experts_;
  std::shared_ptr<const TokenDispatcher> dispatcher_;
};

// HF's load_balancing_loss_func (Switch Transformer), without an attention
// mask, over the routing of every MoE layer together (tokens of all layers
// concatenated): n_experts * sum_e f_e * P_e, f_e the number of top-k
// assignments to expert e per token, P_e the mean router probability of e.
// Perfect balance gives top_k. Differentiable through P only. A scalar of
// the probabilities' dtype. `global_mean`, when given, turns f and P (means
// over this process's tokens) into means over every data-parallel rank's.
using MeanOverRanks = std::function<Tensor(const Tensor&)>;
Tensor load_balancing_loss(const std::vector<Routing>& layers, int64_t n_experts, int64_t top_k,
                           const MeanOverRanks& global_mean = {});

}  // namespace kiln::nn
