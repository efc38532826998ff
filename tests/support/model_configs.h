// Comparison of model configs for tests: the fields that fix a model's
// architecture (and so its parameters and outputs) agree. The registry name
// and training settings (seq_len, component choices, init_std) are ignored.
#pragma once
#include <gtest/gtest.h>

#include "kiln/models/config.h"

namespace kiln::test {

inline void expect_same_architecture(const ModelConfig& a, const ModelConfig& b) {
  EXPECT_EQ(a.family, b.family);
  EXPECT_EQ(a.dim, b.dim);
  EXPECT_EQ(a.n_layers, b.n_layers);
  EXPECT_EQ(a.n_heads, b.n_heads);
  EXPECT_EQ(a.n_kv_heads, b.n_kv_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.ffn_dim, b.ffn_dim);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.max_position_embeddings, b.max_position_embeddings);
  EXPECT_DOUBLE_EQ(a.rope_theta, b.rope_theta);
  ASSERT_EQ(a.rope_scaling.has_value(), b.rope_scaling.has_value());
  if (a.rope_scaling) {
    EXPECT_DOUBLE_EQ(a.rope_scaling->factor, b.rope_scaling->factor);
    EXPECT_DOUBLE_EQ(a.rope_scaling->low_freq_factor, b.rope_scaling->low_freq_factor);
    EXPECT_DOUBLE_EQ(a.rope_scaling->high_freq_factor, b.rope_scaling->high_freq_factor);
    EXPECT_EQ(a.rope_scaling->original_max_position_embeddings,
              b.rope_scaling->original_max_position_embeddings);
  }
  EXPECT_DOUBLE_EQ(a.norm_eps, b.norm_eps);
  EXPECT_EQ(a.tie_embeddings, b.tie_embeddings);
  EXPECT_EQ(a.qk_norm, b.qk_norm);
  EXPECT_EQ(a.attention_bias, b.attention_bias);
  EXPECT_EQ(a.n_experts, b.n_experts);
  EXPECT_EQ(a.top_k, b.top_k);
  EXPECT_EQ(a.moe_ffn_dim, b.moe_ffn_dim);
  EXPECT_EQ(a.norm_topk_prob, b.norm_topk_prob);
  EXPECT_EQ(a.decoder_sparse_step, b.decoder_sparse_step);
  EXPECT_EQ(a.mlp_only_layers, b.mlp_only_layers);
  EXPECT_DOUBLE_EQ(a.router_aux_loss_coef, b.router_aux_loss_coef);
}

}  // namespace kiln::test
