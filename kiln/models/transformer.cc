#include "kiln/models/transformer.h"

#include "kiln/autograd/scan.h"
#include "kiln/base/error.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/matmul.h"
#include "kiln/ops/shape.h"
#include "kiln/runtime/region.h"

namespace kiln {
namespace {

nn::AttentionConfig attention_config(const ModelConfig& c) {
  nn::AttentionConfig a;
  a.dim = c.dim;
  a.n_heads = c.n_heads;
  a.n_kv_heads = c.n_kv_heads;
  a.head_dim = c.head_dim;
  a.qk_norm = c.qk_norm;
  a.bias = c.attention_bias;
  a.norm_eps = c.norm_eps;
  a.impl = c.attention_impl;
  a.norm_impl = c.norm_impl;
  return a;
}

nn::MoEConfig moe_config(const ModelConfig& c) {
  nn::MoEConfig m;
  m.dim = c.dim;
  m.n_experts = c.n_experts;
  m.top_k = c.top_k;
  m.ffn_dim = c.moe_ffn_dim;
  m.norm_topk_prob = c.norm_topk_prob;
  m.impl = c.moe_impl;
  m.routing_bias = c.router_bias_update_rate > 0;
  return m;
}

// Checked before any module is built from it.
const ModelConfig& validated(const ModelConfig& c) {
  c.validate();
  return c;
}

}  // namespace

TransformerBlock::TransformerBlock(const ModelConfig& c, int64_t layer, DType dtype)
    : self_attn(attention_config(c), dtype),
      input_layernorm(c.dim, c.norm_eps, dtype, c.norm_impl),
      post_attention_layernorm(c.dim, c.norm_eps, dtype, c.norm_impl) {
  register_module("self_attn", &self_attn);
  if (c.is_moe_layer(layer)) {
    moe = std::make_unique<nn::MoE>(moe_config(c), dtype);
    register_module("mlp", moe.get());
  } else {
    mlp = std::make_unique<nn::SwiGLU>(c.dim, c.ffn_dim, dtype);
    register_module("mlp", mlp.get());
  }
  register_module("input_layernorm", &input_layernorm);
  register_module("post_attention_layernorm", &post_attention_layernorm);
}

Tensor TransformerBlock::forward(const Tensor& x, const RopeTables& rope, const Tensor& doc_ids,
                                 nn::Routing* routing) const {
  return feed_forward(
      x + self_attn.forward(input_layernorm.forward(x), rope.cos, rope.sin, doc_ids), routing);
}

Tensor TransformerBlock::feed_forward(const Tensor& h, nn::Routing* routing) const {
  Tensor n = post_attention_layernorm.forward(h);
  return h + (moe ? moe->forward(n, routing) : mlp->forward(n));
}

TransformerModel::TransformerModel(const ModelConfig& c, DType dtype)
    : embed_tokens(c.vocab_size, c.dim, dtype),
      norm(c.dim, c.norm_eps, dtype, c.norm_impl),
      rotary(c.head_dim, c.rope_theta, c.rope_scaling, c.seq_len) {
  for (int64_t l = 0; l < c.n_layers; ++l)
    layers.push_back(std::make_unique<TransformerBlock>(c, l, dtype));
  register_module("embed_tokens", &embed_tokens);
  register_module("layers", &layers);
  register_module("norm", &norm);
}

Tensor TransformerModel::forward(const Tensor& ids, const ForwardOptions& options,
                                 std::vector<nn::Routing>* routing) const {
  KILN_CHECK(ids.rank() == 2 && is_integer(ids.dtype()),
             "model: ids must be i32/i64 [batch, seq], got ", dtype_name(ids.dtype()), ids.shape());
  const int64_t B = ids.dim(0), S = ids.dim(1);
  for (const Tensor* t : {&options.doc_ids, &options.positions})
    KILN_CHECK(!t->defined() || (t->rank() == 2 && t->dim(0) == B && t->dim(1) == S),
               "model: doc_ids and positions must be [", B, ", ", S, "] like ids, got ",
               t->shape());
  Tensor x = embed_tokens.forward(ids);
  RopeTables rope = rotary.tables(S, x.dtype(), options.positions, x.device());
  if (options.scan_layers)
    return norm.forward(scan_layers(
        x, rope, options.doc_ids,
        options.stacked_layers.empty() ? stacked_layer_parameters() : options.stacked_layers,
        routing));
  for (size_t l = 0; l < layers.size(); ++l) {
    nn::Routing r;
    RegionGuard region(cat("layers.", l));  // per-block compile and remat work block by block
    x = layers[l].forward(x, rope, options.doc_ids, &r);
    if (routing && layers[l].is_moe()) routing->push_back(std::move(r));
  }
  return norm.forward(x);
}

std::vector<Tensor> TransformerModel::stacked_layer_parameters() const {
  std::vector<std::vector<Tensor>> per_param;  // [parameter][layer]
  for (size_t l = 0; l < layers.size(); ++l) {
    auto params = layers[l].named_parameters();
    KILN_CHECK(l == 0 || params.size() == per_param.size(), "compile.scan_layers: layer ", l,
               " has ", params.size(), " parameters but layer 0 has ", per_param.size(),
               " (dense and MoE layers mixed?): every layer must be the same; set "
               "--compile.scan_layers=false");
    per_param.resize(params.size());
    for (size_t k = 0; k < params.size(); ++k) {
      KILN_CHECK(l == 0 || params[k].second->type() == layers[0].parameters()[k].type(),
                 "compile.scan_layers: parameter ", params[k].first, " of layer ", l, " is ",
                 ir::to_string(params[k].second->type()), ", unlike layer 0's: every layer must "
                 "be the same; set --compile.scan_layers=false");
      per_param[k].push_back(*params[k].second);
    }
  }
  std::vector<Tensor> stacked;
  for (const auto& p : per_param) stacked.push_back(stack(p));  // two nodes however deep
  return stacked;
}

// The decoder stack as one scan: the body is layer 0's block run with the
// iteration's slice of every parameter stacked over the layers, so one body
// serves every layer (which must therefore all have the same parameters).
Tensor TransformerModel::scan_layers(const Tensor& x, const RopeTables& rope,
                                     const Tensor& doc_ids, const std::vector<Tensor>& stacked,
                                     std::vector<nn::Routing>* routing) const {
  KILN_CHECK(stacked.size() == layers[0].named_parameters().size(), "compile.scan_layers: ",
             stacked.size(), " stacked layer parameters for blocks of ",
             layers[0].named_parameters().size());
  for (const Tensor& t : stacked)
    KILN_CHECK(t.rank() >= 1 && t.dim(0) == int64_t(layers.size()),
               "compile.scan_layers: a stacked layer parameter is ", t.shape(), ", not [",
               layers.size(), ", ...]");
  std::vector<Tensor> invariants{rope.cos, rope.sin};
  if (doc_ids.defined()) invariants.push_back(doc_ids);

  const bool moe = layers[0].is_moe();
  const size_t np = stacked.size();
  // ParameterScope swaps layer 0's parameters for the body's and restores them.
  auto& block = const_cast<TransformerBlock&>(layers[0]);
  ScanResult r = scan(
      [&](const std::vector<Tensor>& a) {
        nn::ParameterScope scope(block, std::vector<Tensor>(a.begin() + 1, a.begin() + 1 + long(np)));
        RopeTables iteration_rope{a[np + 1], a[np + 2]};
        Tensor doc = doc_ids.defined() ? a[np + 3] : Tensor();
        nn::Routing rt;
        std::vector<Tensor> out{block.forward(a[0], iteration_rope, doc, &rt)};
        if (moe)
          out.insert(out.end(),
                     {rt.probs, rt.indices, rt.weights, rt.counts, rt.dropped, rt.z_loss});
        return out;
      },
      {x}, stacked, invariants);
  if (moe && routing)
    for (int64_t l = 0; l < int64_t(layers.size()); ++l) {
      auto layer_slice = [&](size_t k) { return r.ys[k].slice(0, l, l + 1).squeeze(0); };
      routing->push_back({layer_slice(0), layer_slice(1), layer_slice(2), layer_slice(3),
                          layer_slice(4), layer_slice(5)});
    }
  return r.carries[0];
}

CausalLM::CausalLM(const ModelConfig& c, DType dtype)
    : model(validated(c), dtype), config_(c), loss_(nn::loss_impls().get(c.loss_impl)) {
  register_module("model", &model);
  if (!c.tie_embeddings) {
    lm_head = std::make_unique<nn::Linear>(c.dim, c.vocab_size, false, dtype);
    register_module("lm_head", lm_head.get());
  }
}

const Tensor& CausalLM::lm_head_weight() const {
  return lm_head ? lm_head->weight : model.embed_tokens.weight;
}

Tensor CausalLM::logits(const Tensor& ids, const ForwardOptions& options) const {
  Tensor h = model.forward(ids, options, nullptr);
  return matmul(h.reshape({-1, config_.dim}), lm_head_weight(), false, true)
      .reshape({ids.dim(0), ids.dim(1), config_.vocab_size});
}

LMOutput CausalLM::forward(const Tensor& ids, const Tensor& targets,
                           const ForwardOptions& options, int64_t ignore_index) const {
  KILN_CHECK(targets.shape() == ids.shape() && is_integer(targets.dtype()),
             "CausalLM: targets must be i32/i64 shaped like ids ", ids.shape(), ", got ",
             dtype_name(targets.dtype()), targets.shape());
  std::vector<nn::Routing> routing;
  Tensor h = model.forward(ids, options, &routing).reshape({-1, config_.dim});
  Tensor t = targets.reshape({-1});
  LMOutput out;
  out.ce_loss = loss_(h, lm_head_weight(), t, ignore_index);
  out.loss = out.ce_loss;
  if (!routing.empty()) {
    out.aux_loss =
        nn::load_balancing_loss(routing, config_.n_experts, config_.top_k, router_stats_mean);
    if (config_.router_aux_loss_coef != 0)
      out.loss = out.ce_loss + out.aux_loss.to(out.ce_loss.dtype()) * config_.router_aux_loss_coef;
    Tensor z;
    for (const nn::Routing& r : routing) {
      out.expert_counts.push_back(r.counts);
      out.dropped = out.dropped.defined() ? out.dropped + r.dropped : r.dropped;
      z = z.defined() ? z + r.z_loss : r.z_loss;
    }
    out.z_loss = z / double(routing.size());
    if (config_.router_z_loss_coef != 0)
      out.loss = out.loss + out.z_loss.to(out.ce_loss.dtype()) * config_.router_z_loss_coef;
  }
  return out;
}

std::unique_ptr<CausalLM> build_model(const ModelConfig& config, DType dtype, uint64_t seed) {
  auto m = std::make_unique<CausalLM>(config, dtype);
  Generator g(seed);
  m->init_parameters(g, config.init_std);
  return m;
}

}  // namespace kiln
