// Grouped-query self-attention as in HF's LlamaAttention / Qwen3Attention:
// q, k, v projections, optional per-head RMSNorm of q and k (Qwen3), rotary
// embedding, causal attention (optionally within packed documents only),
// output projection.
#pragma once
#include <string>

#include "kiln/nn/component_registry.h"
#include "kiln/nn/layers.h"
#include "kiln/ops/attention.h"

namespace kiln::nn {

// The attention itself, after the projections and rope: q [B, Hq, Sq, D],
// k [B, Hkv, Sk, D], v [B, Hkv, Sk, Dv] (GQA) -> [B, Hq, Sq, Dv]. doc_ids,
// when defined, i32/i64 [B, S] (Sq == Sk == S): a query attends only keys
// of its own document. Implementations: kiln/nn/components/attention_*.cc.
using AttentionFn = std::function<Tensor(const Tensor& q, const Tensor& k, const Tensor& v,
                                         const AttentionOptions& options, const Tensor& doc_ids)>;
ComponentRegistry<AttentionFn>& attention_impls();

struct AttentionConfig {
  int64_t dim = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0;
  bool qk_norm = false;
  bool bias = false;  // on q, k, v and o
  double norm_eps = 1e-6;
  std::string impl = "composite";  // an attention_impls() name
  std::string norm_impl = "fused";  // of the q/k norms: a norm_impls() name
};

class Attention : public Module {
 public:
  Attention(const AttentionConfig& config, DType dtype = DType::f32);

  // x [B, S, dim]; cos, sin from RotaryEmbedding::tables ([S, head_dim] or
  // [B, S, head_dim]); doc_ids, when defined, i32/i64 [B, S]: a token attends
  // only earlier tokens of its own document. Returns [B, S, dim].
  Tensor forward(const Tensor& x, const Tensor& cos, const Tensor& sin,
                 const Tensor& doc_ids = Tensor()) const;
  // forward's steps, for callers that attend differently (a KV cache): the
  // projected, normalised and rotated heads of x, q [B, Hq, S, head_dim] and
  // k, v [B, Hkv, S, head_dim] (this rank's heads under tensor parallelism)...
  struct Heads {
    Tensor q, k, v;
  };
  Heads project(const Tensor& x, const Tensor& cos, const Tensor& sin) const;
  // ...and the output projection of the attention result o [B, Hq, S, Dv]: [B, S, dim].
  Tensor output(const Tensor& o) const;
  // The configured implementation on projected, rotated heads (AttentionFn).
  Tensor attend(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& options,
                const Tensor& doc_ids = Tensor()) const {
    return attend_(q, k, v, options, doc_ids);
  }

  AttentionConfig config;
  TensorHook input_hook;  // on x, before the projections read it
  Linear q_proj, k_proj, v_proj, o_proj;
  std::unique_ptr<RMSNorm> q_norm, k_norm;  // with qk_norm only

 private:
  AttentionFn attend_;
};

// Attention of q [B, Hq, Sq, D] to k [B, Hkv, Sk, D], v [B, Hkv, Sk, Dv]
// (GQA) where query i sees key j only where allowed[b, i, j] (bool [B, Sq,
// Sk], or [1, Sq, Sk] for every row), materialising the scores. Scores and
// softmax in f32 (f64 for f64). A query that sees no key gets the mean of v.
Tensor masked_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& allowed);

// Causal attention of q [B, Hq, S, D], k [B, Hkv, S, D], v [B, Hkv, S, Dv]
// (GQA) where query i sees key j only if j <= i and doc_ids[b, i] ==
// doc_ids[b, j]: the reference for flash_attention's document masking,
// materialising the [S, S] scores. Scores and softmax in f32 (f64 for f64).
Tensor document_causal_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                 const Tensor& doc_ids);

}  // namespace kiln::nn
