// The model registry: published parameter counts, active parameters, FLOPs
// per token, lookup errors and validation.
#include "kiln/models/config.h"

#include <gtest/gtest.h>

#include "kiln/base/error.h"

namespace kiln {
namespace {

// Expected counts: sum(p.numel() for p in model.parameters()) of the
// Hugging Face model (transformers 5.24, LlamaForCausalLM /
// Qwen3ForCausalLM / Qwen3MoeForCausalLM built on the meta device from each
// checkpoint's config.json values), which counts a tied embedding once.
// They agree with the published sizes: Llama 3.1 8B 8.03B, 70B 70.6B, 405B
// 405.9B, Llama 3.2 1B 1.24B, 3B 3.21B; Qwen3-0.6B 0.6B ... 32B 32.8B,
// Qwen3-30B-A3B 30.5B, Qwen3-235B-A22B 235B.
TEST(ModelConfig, ParamCountsMatchPublishedModels) {
  const std::pair<const char*, int64_t> expected[] = {
      {"llama3_1b", 1235814400},       {"llama3_3b", 3212749824},
      {"llama3_8b", 8030261248},       {"llama3_70b", 70553706496},
      {"llama3_405b", 405853388800},   {"qwen3_0.6b", 596049920},
      {"qwen3_1.7b", 1720574976},      {"qwen3_4b", 4022468096},
      {"qwen3_8b", 8190735360},        {"qwen3_14b", 14768307200},
      {"qwen3_32b", 32762123264},      {"qwen3_30b_a3b", 30532122624},
      {"qwen3_235b_a22b", 235093634560},
  };
  for (auto [name, count] : expected) EXPECT_EQ(param_count(model_config(name)), count) << name;
}

// Active = total less the unchosen experts: 48 layers x (128 - 8) experts x
// 3 x 2048 x 768 for 30B-A3B (3.35B, published "3.3B activated"); 94 x 120 x
// 3 x 4096 x 1536 for 235B-A22B (22.2B, "22B activated").
TEST(ModelConfig, ActiveParams) {
  EXPECT_EQ(active_param_count(model_config("qwen3_30b_a3b")), 3353032704);
  EXPECT_EQ(active_param_count(model_config("qwen3_235b_a22b")), 22190763520);
  EXPECT_EQ(active_param_count(model_config("llama3_8b")), param_count(model_config("llama3_8b")));
}

// 6 * (N - embedding table) + 12 * layers * heads * head_dim * seq, by hand.
TEST(ModelConfig, FlopsPerToken) {
  // 6 * (8030261248 - 128256 * 4096) + 12 * 32 * 32 * 128 * 8192
  EXPECT_DOUBLE_EQ(flops_per_token(model_config("llama3_8b"), 8192), 57914449920.0);
  // Tied: the LM head matmul stays in N. 6 * 1235814400 + 12 * 16 * 32 * 64 * 8192
  EXPECT_DOUBLE_EQ(flops_per_token(model_config("llama3_1b"), 8192), 10636111872.0);
  // MoE: active parameters. 6 * (3353032704 - 151936 * 2048) + 12 * 48 * 32 * 128 * 4096
  EXPECT_DOUBLE_EQ(flops_per_token(model_config("qwen3_30b_a3b"), 4096), 27914883072.0);
  EXPECT_THROW(flops_per_token(model_config("llama3_8b"), 0), Error);
}

TEST(ModelConfig, RegistryHasEveryName) {
  for (const char* name :
       {"llama3_debug", "llama3_1b", "llama3_3b", "llama3_8b", "llama3_70b", "llama3_405b",
        "qwen3_debug", "qwen3_0.6b", "qwen3_1.7b", "qwen3_4b", "qwen3_8b", "qwen3_14b",
        "qwen3_32b", "qwen3_moe_debug", "qwen3_30b_a3b", "qwen3_235b_a22b"}) {
    const ModelConfig& c = model_config(name);
    EXPECT_EQ(c.name, name);
    EXPECT_NO_THROW(c.validate());
  }
  EXPECT_EQ(model_config_names().size(), 16u);
}

TEST(ModelConfig, FamilyFeatures) {
  const ModelConfig& l8 = model_config("llama3_8b");
  EXPECT_EQ(l8.family, "llama3");
  EXPECT_FALSE(l8.tie_embeddings);
  EXPECT_FALSE(l8.qk_norm);
  ASSERT_TRUE(l8.rope_scaling.has_value());
  EXPECT_EQ(l8.rope_scaling->factor, 8);
  EXPECT_EQ(model_config("llama3_1b").rope_scaling->factor, 32);
  EXPECT_TRUE(model_config("llama3_3b").tie_embeddings);
  const ModelConfig& q = model_config("qwen3_0.6b");
  EXPECT_TRUE(q.qk_norm && q.tie_embeddings && !q.rope_scaling);
  EXPECT_EQ(q.head_dim, 128);
  EXPECT_NE(q.n_heads * q.head_dim, q.dim);
  EXPECT_FALSE(model_config("qwen3_8b").tie_embeddings);
  const ModelConfig& m = model_config("qwen3_30b_a3b");
  EXPECT_TRUE(m.is_moe() && m.is_moe_layer(0) && m.is_moe_layer(47));
  EXPECT_EQ(m.n_experts, 128);
  EXPECT_EQ(m.top_k, 8);
  for (const char* debug : {"llama3_debug", "qwen3_debug", "qwen3_moe_debug"})
    EXPECT_EQ(model_config(debug).vocab_size, 2048) << debug;
}

TEST(ModelConfig, UnknownNameSuggestsNearest) {
  try {
    model_config("qwen3_0.5b");
    FAIL() << "no error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("unknown model 'qwen3_0.5b'"), std::string::npos) << m;
    EXPECT_NE(m.find("did you mean 'qwen3_0.6b'"), std::string::npos) << m;
    EXPECT_NE(m.find("llama3_405b"), std::string::npos) << m;  // the list of valid names
  }
}

TEST(ModelConfig, MlpOnlyLayersAndSparseStep) {
  ModelConfig c = model_config("qwen3_moe_debug");
  c.mlp_only_layers = {0};
  EXPECT_FALSE(c.is_moe_layer(0));
  EXPECT_TRUE(c.is_moe_layer(1));
  ModelConfig all_moe = model_config("qwen3_moe_debug");
  // A dense layer swaps 3 * dim * moe_ffn * E + router for 3 * dim * ffn.
  EXPECT_EQ(param_count(all_moe) - param_count(c),
            c.n_experts * c.dim + c.n_experts * 3 * c.dim * c.moe_ffn_dim - 3 * c.dim * c.ffn_dim);
  c.mlp_only_layers = {};
  c.decoder_sparse_step = 2;  // HF: layer l is sparse when (l + 1) % step == 0
  EXPECT_FALSE(c.is_moe_layer(0));
  EXPECT_TRUE(c.is_moe_layer(1));
}

TEST(ModelConfig, ValidateNamesTheField) {
  auto expect_error = [](ModelConfig c, const char* needle) {
    try {
      c.validate();
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  ModelConfig c = model_config("llama3_debug");
  c.n_kv_heads = 3;
  expect_error(c, "multiple of n_kv_heads");
  c = model_config("llama3_debug");
  c.family = "gpt2";
  expect_error(c, "family 'gpt2'");
  c = model_config("llama3_debug");
  c.attention_impl = "fast";
  expect_error(c, "attention_impl 'fast'");
  c = model_config("qwen3_moe_debug");
  c.top_k = 9;
  expect_error(c, "top_k <= n_experts");
  c = model_config("llama3_debug");
  c.vocab_size = 0;
  expect_error(c, "vocab_size must be positive");
  // The router's training terms on a model without routers.
  c = model_config("llama3_debug");
  c.router_z_loss_coef = 1e-3;
  expect_error(c, "router_z_loss_coef = 0.001 trains an MoE router, and this model is dense");
  c = model_config("llama3_debug");
  c.router_bias_update_rate = 1e-3;
  expect_error(c, "router_bias_update_rate = 0.001 trains an MoE router");
  c = model_config("qwen3_moe_debug");
  c.router_z_loss_coef = 1e-3;
  c.router_bias_update_rate = 1e-3;
  EXPECT_NO_THROW(c.validate());
}

}  // namespace
}  // namespace kiln
