// The scaled_dot_product_attention op: one IR op whose composite is built
// from the basic ops; autograd differentiates the composite. The fused,
// blockwise variant is flash_attention (fused_kernels.h), which takes the
// same options.
#pragma once
#include <optional>

#include "kiln/runtime/tensor.h"

namespace kiln {

struct AttentionOptions {
  // Query i attends key j only if j <= i + (Sk - Sq): queries are the last
  // Sq positions of the Sk keys (bottom-right alignment, as flash-attention
  // and HF with a KV cache; the same as torch's is_causal when Sq == Sk).
  // Needs Sq <= Sk.
  bool causal = false;
  // Multiplies q @ k^T; default 1 / sqrt(head_dim).
  std::optional<double> scale;
  // 0: none. w > 0 (needs causal): query i also needs j > i + (Sk - Sq) - w,
  // so it sees the w most recent positions, itself included; with Sq == Sk,
  // i - w < j <= i (Mistral's and HF's sliding-window semantics).
  int64_t sliding_window = 0;
};

// softmax(q @ k^T * scale + mask) @ v with q [B, Hq, Sq, D], k [B, Hkv, Sk, D]
// and v [B, Hkv, Sk, Dv] of one floating dtype; the result is [B, Hq, Sq, Dv].
// Grouped-query attention when Hq is a multiple of Hkv: query head h reads
// kv head h / (Hq / Hkv) (HF's repeat_kv). Scores and softmax are computed in
// f32 (f64 for f64); the probabilities round to v's dtype for the product
// with v, as flash-attention does.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& options = {});

}  // namespace kiln
