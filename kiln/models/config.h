// Model configurations: the hyper-parameters of a Llama 3, Qwen3 or
// Qwen3-MoE transformer, a registry of the published sizes (plus tiny debug
// sizes), and the parameter count and training FLOPs of a config, computed
// from the hyper-parameters alone (no weights are allocated).
//
// Field names follow the model (TorchTitan's where one exists); the comment
// on each names the Hugging Face config.json key it corresponds to.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/ops/rope.h"

namespace kiln {

struct ModelConfig {
  std::string name;               // registry name, e.g. "llama3_8b" (informational)
  std::string family = "llama3";  // "llama3" | "qwen3" | "qwen3_moe"

  int64_t dim = 0;         // hidden_size
  int64_t n_layers = 0;    // num_hidden_layers
  int64_t n_heads = 0;     // num_attention_heads
  int64_t n_kv_heads = 0;  // num_key_value_heads (GQA when < n_heads)
  int64_t head_dim = 0;    // head_dim (Llama: hidden_size / num_attention_heads)
  int64_t ffn_dim = 0;     // intermediate_size: the dense SwiGLU MLP's width
  int64_t vocab_size = 0;  // vocab_size
  // The default training sequence length (recipes override it), not the
  // longest context the model supports (max_position_embeddings).
  int64_t seq_len = 0;
  int64_t max_position_embeddings = 0;  // max_position_embeddings

  double rope_theta = 10000;                   // rope_theta
  std::optional<Llama31Scaling> rope_scaling;  // rope_scaling {rope_type: "llama3"}
  double norm_eps = 1e-5;                      // rms_norm_eps
  bool tie_embeddings = false;                 // tie_word_embeddings
  bool qk_norm = false;          // RMSNorm of each q and k head (Qwen3)
  bool attention_bias = false;   // attention_bias: bias on q, k, v and o projections

  // Mixture of experts (family "qwen3_moe"); n_experts == 0 means dense.
  int64_t n_experts = 0;        // num_experts
  int64_t top_k = 0;            // num_experts_per_tok
  int64_t moe_ffn_dim = 0;      // moe_intermediate_size: each expert's SwiGLU width
  bool norm_topk_prob = false;  // norm_topk_prob: renormalise the top-k weights to sum to 1
  int64_t decoder_sparse_step = 1;       // decoder_sparse_step
  std::vector<int64_t> mlp_only_layers;  // mlp_only_layers: dense layers in an MoE model
  double router_aux_loss_coef = 0;       // router_aux_loss_coef
  // Training-only router terms (no HF field): the z-loss weight (ST-MoE,
  // the squared log-partition of the router logits; 0: off).
  double router_z_loss_coef = 0;
  // Auxiliary-loss-free balancing (DeepSeek-V3), 0: off. Above 0 every MoE
  // router gains a per-expert bias (mlp.gate.e_score_correction_bias), added
  // to the scores only to choose the top-k, which the trainer moves by this
  // much after each step towards balance (kiln/train/router_bias.h).
  double router_bias_update_rate = 0;

  double init_std = 0.02;  // initializer_range: std of the normal weight init

  // Component implementations, each a name in its registry (kiln/nn/*.h:
  // attention_impls(), ...), swappable by recipes before the model is built.
  std::string attention_impl = "composite";
  std::string loss_impl = "composite";
  std::string moe_impl = "composite";
  std::string norm_impl = "fused";

  bool is_moe() const { return n_experts > 0; }
  // Whether decoder layer `layer` has the MoE block (HF Qwen3MoeDecoderLayer's rule).
  bool is_moe_layer(int64_t layer) const;
  // Throws kiln::Error naming the first inconsistent field.
  void validate() const;
};

// The registered config called `name` (see model_config_names()); an unknown
// name is a kiln::Error listing the valid names and the nearest one.
const ModelConfig& model_config(std::string_view name);
std::vector<std::string> model_config_names();

// Parameters of the model a config describes, the tied embedding counted once.
int64_t param_count(const ModelConfig& config);
// Parameters one token uses: as param_count, but of each MoE layer's experts
// only top_k (the "A3B" of Qwen3-30B-A3B). Equals param_count for dense models.
int64_t active_param_count(const ModelConfig& config);

// Training FLOPs per token (forward + backward) at sequence length seq_len,
// TorchTitan's convention (get_nparams_and_flops):
//   6 * N + 12 * n_layers * n_heads * head_dim * seq_len
// N is active_param_count less the embedding table (a lookup, not a matmul);
// the LM head is a matmul, so it stays in N even when tied to the embedding.
// 6 = 2 FLOPs per multiply-add x (1 forward + 2 backward matmuls). The
// attention term counts q @ k^T and p @ v (2 matmuls, 6 with backward, 2 FLOPs
// each) over all seq_len keys: causal sparsity is not discounted and the
// flash-attention recomputation is not counted.
double flops_per_token(const ModelConfig& config, int64_t seq_len);
// The same for LoRA training with `adapter_params` adapter elements: the
// frozen weights' backward computes the input gradient only, so they count
// 4 * N, and the adapters 6 each.
double lora_flops_per_token(const ModelConfig& config, int64_t seq_len, int64_t adapter_params);

}  // namespace kiln
