// The decoder-only transformer of Llama 3, Qwen3 and Qwen3-MoE, built from a
// ModelConfig: one generic model whose family differences are config fields
// (qk_norm, MoE layers, tied embeddings, rope scaling). The module tree and
// parameter names are Hugging Face's *ForCausalLM:
//   model.embed_tokens.weight
//   model.layers.{i}.self_attn.{q,k,v,o}_proj.weight   (+ .bias with attention_bias)
//   model.layers.{i}.self_attn.{q,k}_norm.weight        (qk_norm)
//   model.layers.{i}.mlp.{gate,up,down}_proj.weight     (dense layers)
//   model.layers.{i}.mlp.experts.{gate_up,down}_proj, mlp.gate.weight  (MoE layers)
//   model.layers.{i}.{input,post_attention}_layernorm.weight
//   model.norm.weight
//   lm_head.weight                                      (absent when tied)
#pragma once
#include <memory>
#include <vector>

#include "kiln/models/config.h"
#include "kiln/nn/attention.h"
#include "kiln/nn/layers.h"
#include "kiln/nn/loss.h"
#include "kiln/nn/mlp.h"
#include "kiln/nn/moe.h"
#include "kiln/nn/rotary.h"

namespace kiln {

// Per-call inputs beyond the token ids.
struct ForwardOptions {
  // i32/i64 [B, S]: packed documents; a token attends only earlier tokens
  // with the same id.
  Tensor doc_ids;
  // i32/i64 [B, S]: rotary positions (default 0..S-1 in every row), e.g.
  // restarting at each packed document. Must be below the config's seq_len.
  Tensor positions;
  // Run the decoder stack as one scan over stacked per-layer weights (one
  // loop body however deep the model; kiln/autograd/scan.h) instead of
  // unrolled layer by layer. Same results, bit for bit.
  bool scan_layers = false;
  // With scan_layers: the layers' parameters already stacked, one [n_layers,
  // ...] tensor per parameter of a block (in a block's named_parameters()
  // order), as a trainer keeps them; the layers' own parameters are not read.
  // Empty: stacked from the layers' parameters.
  std::vector<Tensor> stacked_layers;
};

class TransformerBlock : public nn::Module {
 public:
  TransformerBlock(const ModelConfig& config, int64_t layer, DType dtype);
  // x [B, S, dim]; `routing` receives the MoE router's decisions (MoE layers).
  Tensor forward(const Tensor& x, const RopeTables& rope, const Tensor& doc_ids,
                 nn::Routing* routing) const;
  // The block's second half, after attention's residual h: h + mlp(norm(h)).
  Tensor feed_forward(const Tensor& h, nn::Routing* routing) const;
  bool is_moe() const { return moe != nullptr; }

  nn::Attention self_attn;
  std::unique_ptr<nn::SwiGLU> mlp;  // one of mlp / moe, registered as "mlp"
  std::unique_ptr<nn::MoE> moe;
  nn::RMSNorm input_layernorm, post_attention_layernorm;
};

// HF's *Model: embeddings, decoder layers, final norm (the "model." prefix).
class TransformerModel : public nn::Module {
 public:
  TransformerModel(const ModelConfig& config, DType dtype);
  // ids [B, S] -> normalised hidden states [B, S, dim]; `routing`, when
  // given, receives one entry per MoE layer.
  Tensor forward(const Tensor& ids, const ForwardOptions& options,
                 std::vector<nn::Routing>* routing) const;

  nn::Embedding embed_tokens;
  nn::ModuleList<TransformerBlock> layers;
  nn::RMSNorm norm;
  nn::RotaryEmbedding rotary;

 private:
  // Every block's parameters, one [n_layers, ...] tensor per parameter.
  std::vector<Tensor> stacked_layer_parameters() const;
  // The layers as one scan over their stacked parameters (scan_layers).
  Tensor scan_layers(const Tensor& x, const RopeTables& rope, const Tensor& doc_ids,
                     const std::vector<Tensor>& stacked, std::vector<nn::Routing>* routing) const;
};

struct LMOutput {
  // ce_loss + router_aux_loss_coef * aux_loss + router_z_loss_coef * z_loss:
  // what training minimises.
  Tensor loss;
  Tensor ce_loss;   // mean cross-entropy over targets != ignore_index (f32; f64 for f64)
  Tensor aux_loss;  // load-balancing loss (MoE models only)
  Tensor z_loss;    // router z-loss, the mean of the layers' (MoE models only)
  std::vector<Tensor> expert_counts;  // per MoE layer: [n_experts] i64 tokens routed
  Tensor dropped;  // i64 scalar: assignments the token dispatchers dropped, over the layers
};

class CausalLM : public nn::Module {
 public:
  // Parameters are zeros (norms ones): call init_parameters or
  // load_state_dict next, or use build_model.
  CausalLM(const ModelConfig& config, DType dtype = DType::f32);

  // ids [B, S] (i32/i64) -> logits [B, S, vocab_size] in the parameters' dtype.
  Tensor logits(const Tensor& ids, const ForwardOptions& options = {}) const;
  // targets [B, S]: targets[b, s] is the token after ids[b, s] (already
  // shifted, unlike HF's labels); ignore_index entries do not count. The
  // config's loss_impl computes the LM head and the cross-entropy.
  LMOutput forward(const Tensor& ids, const Tensor& targets, const ForwardOptions& options = {},
                   int64_t ignore_index = -100) const;
  Tensor loss(const Tensor& ids, const Tensor& targets, const ForwardOptions& options = {}) const {
    return forward(ids, targets, options).loss;
  }

  const ModelConfig& config() const { return config_; }
  // The LM head's [vocab_size, dim] weight: the embedding's when tied.
  const Tensor& lm_head_weight() const;

  TransformerModel model;
  std::unique_ptr<nn::Linear> lm_head;  // null when tie_embeddings
  // The load-balancing loss's router statistics over every data-parallel
  // rank's tokens (nn::load_balancing_loss); unset: this process's. A
  // parallelism plan sets it.
  nn::MeanOverRanks router_stats_mean;

 private:
  ModelConfig config_;
  nn::LossFn loss_;
};

// A validated, initialised model: parameters drawn from normal(0, init_std)
// with Generator(seed), norms 1, biases 0 (HF's _init_weights).
std::unique_ptr<CausalLM> build_model(const ModelConfig& config, DType dtype = DType::f32,
                                      uint64_t seed = 0);

}  // namespace kiln
