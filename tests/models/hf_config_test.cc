// config.json <-> ModelConfig: published hub configs parse to the registry's
// architectures, every registry config round-trips, transformers 5's layout
// is read too, absent keys take transformers' defaults, and every
// unsupported feature is a clear error.
#include "kiln/models/hf_config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "kiln/base/error.h"
#include "tests/support/model_configs.h"

namespace kiln {
namespace {

using json = nlohmann::json;

template <class F>
void expect_error(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "no error was raised";
  } catch (const Error& e) {
    for (const std::string& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "'" << p << "' not in: " << e.what();
  }
}

// meta-llama/Llama-3.2-1B's config.json.
const char* kLlama32_1B = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": 64, "hidden_act": "silu",
  "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192,
  "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
  "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "transformers_version": "4.45.0.dev0", "use_cache": true, "vocab_size": 128256})";

// Qwen/Qwen3-0.6B's config.json.
const char* kQwen3_06B = R"({
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
  "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
  "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
  "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06, "rope_scaling": null, "rope_theta": 1000000, "sliding_window": null,
  "tie_word_embeddings": true, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
  "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})";

// Qwen/Qwen3-30B-A3B's config.json.
const char* kQwen3_30B_A3B = R"({
  "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 151643, "decoder_sparse_step": 1, "eos_token_id": 151645, "head_dim": 128,
  "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
  "intermediate_size": 6144, "max_position_embeddings": 40960, "max_window_layers": 48,
  "mlp_only_layers": [], "model_type": "qwen3_moe", "moe_intermediate_size": 768,
  "norm_topk_prob": true, "num_attention_heads": 32, "num_experts": 128,
  "num_experts_per_tok": 8, "num_hidden_layers": 48, "num_key_value_heads": 4,
  "output_router_logits": false, "rms_norm_eps": 1e-06, "rope_scaling": null,
  "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001, "sliding_window": null,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
  "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})";

TEST(HfConfig, PublishedConfigsParseToTheRegistry) {
  HfConfig l = parse_hf_config(kLlama32_1B);
  test::expect_same_architecture(l.model, model_config("llama3_1b"));
  EXPECT_EQ(l.architecture, "LlamaForCausalLM");
  EXPECT_EQ(l.dtype, DType::bf16);

  HfConfig q = parse_hf_config(kQwen3_06B);
  test::expect_same_architecture(q.model, model_config("qwen3_0.6b"));
  EXPECT_EQ(param_count(q.model), 596049920);  // Qwen3-0.6B's published 0.6B

  HfConfig m = parse_hf_config(kQwen3_30B_A3B);
  test::expect_same_architecture(m.model, model_config("qwen3_30b_a3b"));
  EXPECT_EQ(m.architecture, "Qwen3MoeForCausalLM");
}

TEST(HfConfig, EveryRegistryConfigRoundTrips) {
  for (const std::string& name : model_config_names()) {
    SCOPED_TRACE(name);
    const ModelConfig& c = model_config(name);
    std::string text = hf_config_json(c, DType::bf16);
    HfConfig back = parse_hf_config(text, name);
    test::expect_same_architecture(back.model, c);
    EXPECT_EQ(back.dtype, DType::bf16);
    EXPECT_EQ(back.architecture, hf_architecture(c));
    EXPECT_DOUBLE_EQ(back.model.init_std, c.init_std);
  }
}

TEST(HfConfig, WritesTheClassicLayout) {
  json j = json::parse(hf_config_json(model_config("qwen3_moe_debug")));
  EXPECT_EQ(j["architectures"], json::array({"Qwen3MoeForCausalLM"}));
  EXPECT_EQ(j["model_type"], "qwen3_moe");
  EXPECT_EQ(j["num_experts"], 8);
  EXPECT_EQ(j["num_experts_per_tok"], 2);
  EXPECT_EQ(j["moe_intermediate_size"], 32);
  EXPECT_EQ(j["norm_topk_prob"], true);
  EXPECT_EQ(j["rope_scaling"], nullptr);
  EXPECT_EQ(j["torch_dtype"], "float32");
  EXPECT_EQ(j["hidden_act"], "silu");
  json l = json::parse(hf_config_json(model_config("llama3_8b")));
  EXPECT_EQ(l["rope_scaling"]["rope_type"], "llama3");
  EXPECT_EQ(l["rope_scaling"]["factor"], 8.0);
  EXPECT_EQ(l["rope_theta"], 500000.0);
  EXPECT_FALSE(l.contains("num_experts"));
}

// transformers >= 5 writes rope_parameters and num_local_experts.
TEST(HfConfig, ReadsTheTransformers5Layout) {
  json j = json::parse(kQwen3_30B_A3B);
  j.erase("rope_theta");
  j.erase("rope_scaling");
  j.erase("num_experts");
  j["num_local_experts"] = 128;
  j["rope_parameters"] = {{"rope_theta", 1000000.0}, {"rope_type", "default"}};
  j.erase("torch_dtype");
  j["dtype"] = "float32";
  HfConfig m = parse_hf_config(j.dump());
  test::expect_same_architecture(m.model, model_config("qwen3_30b_a3b"));
  EXPECT_EQ(m.dtype, DType::f32);

  json l = json::parse(kLlama32_1B);
  l.erase("rope_theta");
  l["rope_parameters"] = l["rope_scaling"];
  l["rope_parameters"]["rope_theta"] = 500000.0;
  l.erase("rope_scaling");
  test::expect_same_architecture(parse_hf_config(l.dump()).model, model_config("llama3_1b"));
}

TEST(HfConfig, AbsentKeysTakeTransformersDefaults) {
  HfConfig l = parse_hf_config(R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64,
      "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128,
      "vocab_size": 100})",
                               "mini");
  EXPECT_EQ(l.model.family, "llama3");
  EXPECT_EQ(l.model.n_kv_heads, 4);  // = num_attention_heads
  EXPECT_EQ(l.model.head_dim, 16);   // hidden_size / num_attention_heads
  EXPECT_EQ(l.model.max_position_embeddings, 2048);
  EXPECT_EQ(l.model.seq_len, 2048);
  EXPECT_DOUBLE_EQ(l.model.norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(l.model.rope_theta, 10000);
  EXPECT_FALSE(l.model.rope_scaling.has_value());
  EXPECT_FALSE(l.model.tie_embeddings);
  EXPECT_FALSE(l.model.qk_norm);
  EXPECT_FALSE(l.dtype.has_value());
  EXPECT_EQ(l.model.name, "mini");

  // Without "architectures" the model_type decides; Qwen3's head_dim defaults to 128.
  HfConfig q = parse_hf_config(R"({"model_type": "qwen3", "hidden_size": 64,
      "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": null,
      "intermediate_size": 32, "vocab_size": 10})");
  EXPECT_EQ(q.model.family, "qwen3");
  EXPECT_EQ(q.model.head_dim, 128);
  EXPECT_EQ(q.model.n_kv_heads, 2);
  EXPECT_TRUE(q.model.qk_norm);
  EXPECT_EQ(q.model.seq_len, 4096);  // min(max_position_embeddings 32768, 4096)

  HfConfig m = parse_hf_config(R"({"model_type": "qwen3_moe", "hidden_size": 64,
      "num_hidden_layers": 4, "num_attention_heads": 8, "decoder_sparse_step": 2,
      "mlp_only_layers": [3], "vocab_size": 10})");
  EXPECT_EQ(m.model.n_experts, 128);
  EXPECT_EQ(m.model.top_k, 8);
  EXPECT_EQ(m.model.moe_ffn_dim, 768);
  EXPECT_FALSE(m.model.norm_topk_prob);
  EXPECT_EQ(m.model.n_kv_heads, 4);
  EXPECT_EQ(m.model.head_dim, 8);  // hidden_size / num_attention_heads
  EXPECT_FALSE(m.model.is_moe_layer(0));
  EXPECT_TRUE(m.model.is_moe_layer(1));
  EXPECT_FALSE(m.model.is_moe_layer(3));  // in mlp_only_layers
}

// One key of a valid Llama config replaced.
std::string llama_with(const std::string& key, const json& value) {
  json j = json::parse(kLlama32_1B);
  if (value.is_null() && key.starts_with("-"))
    j.erase(key.substr(1));
  else
    j[key] = value;
  return j.dump();
}

TEST(HfConfig, UnsupportedFeaturesAreClearErrors) {
  auto parse = [](const std::string& text) { parse_hf_config(text, "dir/config.json"); };
  expect_error([&] { parse(llama_with("architectures", {"MistralForCausalLM"})); },
               {"dir/config.json", "architecture 'MistralForCausalLM' is not supported",
                "LlamaForCausalLM, Qwen3ForCausalLM, Qwen3MoeForCausalLM"});
  expect_error([&] { parse(R"({"model_type": "gpt2"})"); },
               {"dir/config.json", "cannot tell the architecture", "gpt2"});
  expect_error([&] { parse(llama_with("model_type", "qwen3")); },
               {"model_type 'qwen3' contradicts architecture 'LlamaForCausalLM'"});
  expect_error([&] { parse(llama_with("hidden_act", "gelu")); },
               {"dir/config.json", "\"hidden_act\"", "\"gelu\" is not supported"});
  expect_error([&] { parse(llama_with("mlp_bias", true)); }, {"\"mlp_bias\"", "not supported"});
  expect_error([&] { parse(llama_with("attention_dropout", 0.1)); },
               {"\"attention_dropout\"", "not supported"});
  expect_error(
      [&] {
        parse(llama_with("quantization_config", {{"quant_method", "fp8"}}));
      },
      {"quantization_config", "not supported"});
  expect_error(
      [&] {
        parse(llama_with("rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}}));
      },
      {"\"rope_scaling\"", "rope_type 'yarn' is not supported", "default and llama3"});
  expect_error(
      [&] {
        parse(llama_with("rope_scaling", {{"type", "linear"}, {"factor", 2.0}}));
      },
      {"rope_type 'linear' is not supported"});
  expect_error(
      [&] {
        parse(llama_with("rope_scaling", {{"rope_type", "llama3"}, {"factor", 8.0}}));
      },
      {"rope_type llama3 needs", "low_freq_factor"});
  expect_error(
      [&] {
        parse(llama_with("rope_parameters", {{"full_attention", {{"rope_type", "default"}}}}));
      },
      {"per-layer-type RoPE parameters are not supported"});
  expect_error([&] { parse(llama_with("hidden_size", "2048")); },
               {"\"hidden_size\"", "must be an integer"});
  expect_error([&] { parse(llama_with("tie_word_embeddings", 1)); },
               {"\"tie_word_embeddings\"", "true or false"});
  expect_error([&] { parse("{\"hidden_size\": "); }, {"dir/config.json", "not valid JSON"});
  expect_error([&] { parse("[]"); }, {"must be a JSON object"});
  expect_error([&] { parse(llama_with("num_key_value_heads", 5)); },
               {"multiple of n_kv_heads"});  // ModelConfig::validate

  json q = json::parse(kQwen3_06B);
  q["use_sliding_window"] = true;
  expect_error([&] { parse(q.dump()); }, {"\"use_sliding_window\"", "not supported"});
  q = json::parse(kQwen3_06B);
  q["layer_types"] = {"full_attention", "sliding_attention"};
  expect_error([&] { parse(q.dump()); }, {"\"sliding_attention\"", "not supported"});

  json m = json::parse(kQwen3_30B_A3B);
  m["mlp_only_layers"] = {48};
  expect_error([&] { parse(m.dump()); }, {"\"mlp_only_layers\"", "48", "[0, 48)"});
  m = json::parse(kQwen3_30B_A3B);
  m["num_experts_per_tok"] = 200;
  expect_error([&] { parse(m.dump()); }, {"top_k <= n_experts"});
}

TEST(HfConfig, WritingRejectsWhatHfCannotExpress) {
  ModelConfig c = model_config("llama3_debug");
  c.qk_norm = true;
  expect_error([&] { hf_config_json(c); }, {"LlamaForCausalLM has no q/k norm"});
  c = model_config("qwen3_debug");
  c.qk_norm = false;
  expect_error([&] { hf_config_json(c); }, {"Qwen3ForCausalLM always has q/k norm"});
  c = model_config("qwen3_debug");
  c.family = "qwen3_moe";
  expect_error([&] { hf_config_json(c); }, {"needs n_experts > 0"});
  expect_error([&] { hf_config_json(model_config("qwen3_debug"), DType::i32); },
               {"not a floating type"});
  expect_error([&] { read_hf_config("/nonexistent/config.json"); },
               {"cannot open", "/nonexistent/config.json"});
}

}  // namespace
}  // namespace kiln
