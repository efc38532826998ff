#include "kiln/models/config.h"

#include <algorithm>
#include <map>
#include <utility>

#include "kiln/base/error.h"
#include "kiln/base/nearest.h"
#include "kiln/models/model_fields.h"

namespace kiln {
namespace {

// The published sizes copy the Hugging Face config.json of each checkpoint
// (meta-llama/Llama-3.2-1B, Llama-3.2-3B, Llama-3.1-8B, Llama-3.1-70B,
// Llama-3.1-405B; Qwen/Qwen3-0.6B ... Qwen3-32B, Qwen3-30B-A3B,
// Qwen3-235B-A22B). Debug sizes are tiny models for tests and smoke runs;
// their vocabulary (2048) is that of a kiln-trained BPE tokenizer.

ModelConfig llama3(std::string name, int64_t dim, int64_t n_layers, int64_t n_heads,
                   int64_t ffn_dim, double rope_factor, bool tie) {
  ModelConfig c;
  c.name = std::move(name);
  c.family = "llama3";
  c.dim = dim;
  c.n_layers = n_layers;
  c.n_heads = n_heads;
  c.n_kv_heads = 8;
  c.head_dim = dim / n_heads;
  c.ffn_dim = ffn_dim;
  c.vocab_size = 128256;
  c.seq_len = 8192;
  c.max_position_embeddings = 131072;
  c.rope_theta = 500000;
  c.rope_scaling = Llama31Scaling{rope_factor, 1, 4, 8192};
  c.norm_eps = 1e-5;
  c.tie_embeddings = tie;
  return c;
}

ModelConfig qwen3(std::string name, int64_t dim, int64_t n_layers, int64_t n_heads,
                  int64_t n_kv_heads, int64_t ffn_dim, bool tie) {
  ModelConfig c;
  c.name = std::move(name);
  c.family = "qwen3";
  c.dim = dim;
  c.n_layers = n_layers;
  c.n_heads = n_heads;
  c.n_kv_heads = n_kv_heads;
  c.head_dim = 128;
  c.ffn_dim = ffn_dim;
  c.vocab_size = 151936;
  c.seq_len = 4096;
  c.max_position_embeddings = 40960;
  c.rope_theta = 1000000;
  c.norm_eps = 1e-6;
  c.tie_embeddings = tie;
  c.qk_norm = true;
  return c;
}

ModelConfig qwen3_moe(std::string name, int64_t dim, int64_t n_layers, int64_t n_heads,
                      int64_t ffn_dim, int64_t moe_ffn_dim) {
  ModelConfig c = qwen3(std::move(name), dim, n_layers, n_heads, 4, ffn_dim, false);
  c.family = "qwen3_moe";
  c.n_experts = 128;
  c.top_k = 8;
  c.moe_ffn_dim = moe_ffn_dim;
  c.norm_topk_prob = true;
  c.router_aux_loss_coef = 0.001;
  return c;
}

// Debug sizes share one shape: 2 layers, 4 query and 2 kv heads.
ModelConfig debug(ModelConfig c, std::string name) {
  c.name = std::move(name);
  c.dim = 64;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.ffn_dim = 192;
  c.vocab_size = 2048;
  c.seq_len = 256;
  c.max_position_embeddings = 2048;
  return c;
}

std::map<std::string, ModelConfig, std::less<>> build_registry() {
  std::vector<ModelConfig> all = {
      llama3("llama3_1b", 2048, 16, 32, 8192, 32, true),
      llama3("llama3_3b", 3072, 28, 24, 8192, 32, true),
      llama3("llama3_8b", 4096, 32, 32, 14336, 8, false),
      llama3("llama3_70b", 8192, 80, 64, 28672, 8, false),
      llama3("llama3_405b", 16384, 126, 128, 53248, 8, false),
      qwen3("qwen3_0.6b", 1024, 28, 16, 8, 3072, true),
      qwen3("qwen3_1.7b", 2048, 28, 16, 8, 6144, true),
      qwen3("qwen3_4b", 2560, 36, 32, 8, 9728, true),
      qwen3("qwen3_8b", 4096, 36, 32, 8, 12288, false),
      qwen3("qwen3_14b", 5120, 40, 40, 8, 17408, false),
      qwen3("qwen3_32b", 5120, 64, 64, 8, 25600, false),
      qwen3_moe("qwen3_30b_a3b", 2048, 48, 32, 6144, 768),
      qwen3_moe("qwen3_235b_a22b", 4096, 94, 64, 12288, 1536),
  };
  // Llama's head_dim is dim / n_heads (16); Qwen3's is its own (32, so that
  // n_heads * head_dim != dim as in the real Qwen3 models).
  ModelConfig l = debug(llama3("", 0, 0, 1, 0, 8, false), "llama3_debug");
  l.head_dim = 16;
  ModelConfig q = debug(qwen3("", 0, 0, 1, 0, 0, true), "qwen3_debug");
  q.head_dim = 32;
  ModelConfig m = debug(qwen3_moe("", 0, 0, 1, 0, 0), "qwen3_moe_debug");
  m.head_dim = 32;
  m.n_experts = 8;
  m.top_k = 2;
  m.moe_ffn_dim = 32;
  all.insert(all.end(), {l, q, m});

  std::map<std::string, ModelConfig, std::less<>> r;
  for (ModelConfig& c : all) {
    c.validate();
    std::string key = c.name;
    r.emplace(std::move(key), std::move(c));
  }
  return r;
}

const std::map<std::string, ModelConfig, std::less<>>& registry() {
  static const auto r = build_registry();
  return r;
}

// Parameters of one decoder layer; `experts` is how many experts to count.
int64_t layer_params(const ModelConfig& c, int64_t layer, int64_t experts) {
  int64_t q = c.n_heads * c.head_dim, kv = c.n_kv_heads * c.head_dim;
  int64_t n = c.dim * (q + 2 * kv) + q * c.dim;     // q, k, v, o projections
  if (c.attention_bias) n += q + 2 * kv + c.dim;  // their biases
  if (c.qk_norm) n += 2 * c.head_dim;
  n += 2 * c.dim;  // input and post-attention norms
  if (c.is_moe_layer(layer))
    n += c.n_experts * c.dim + experts * 3 * c.dim * c.moe_ffn_dim +  // router + experts
         (c.router_bias_update_rate > 0 ? c.n_experts : 0);            // its bias
  else
    n += 3 * c.dim * c.ffn_dim;
  return n;
}

int64_t count(const ModelConfig& c, bool active) {
  c.validate();
  int64_t n = c.vocab_size * c.dim * (c.tie_embeddings ? 1 : 2) + c.dim;  // embeddings, norm
  for (int64_t l = 0; l < c.n_layers; ++l) n += layer_params(c, l, active ? c.top_k : c.n_experts);
  return n;
}

}  // namespace

bool ModelConfig::is_moe_layer(int64_t layer) const {
  return n_experts > 0 && (layer + 1) % decoder_sparse_step == 0 &&
         std::find(mlp_only_layers.begin(), mlp_only_layers.end(), layer) == mlp_only_layers.end();
}

void ModelConfig::validate() const {
  auto where = [&] { return cat("model config '", name, "': "); };
  KILN_CHECK(family == "llama3" || family == "qwen3" || family == "qwen3_moe", where(),
             "family '", family, "' is not one of llama3, qwen3, qwen3_moe");
  for (const ModelField& f : model_fields()) check_model_field(f, *this);
  KILN_CHECK(seq_len > 0, where(), "seq_len must be positive, got ", seq_len);
  KILN_CHECK(n_heads % n_kv_heads == 0, where(), "n_heads (", n_heads,
             ") must be a multiple of n_kv_heads (", n_kv_heads, ")");
  KILN_CHECK(head_dim % 2 == 0, where(), "head_dim must be even for rotary embeddings, got ",
             head_dim);
  KILN_CHECK(decoder_sparse_step > 0, where(), "decoder_sparse_step must be positive");
  bool any_dense = !is_moe();
  for (int64_t l = 0; l < n_layers && !any_dense; ++l) any_dense = !is_moe_layer(l);
  KILN_CHECK(!any_dense || ffn_dim > 0, where(), "ffn_dim must be positive, got ", ffn_dim);
  if (is_moe())
    KILN_CHECK(top_k > 0 && top_k <= n_experts && moe_ffn_dim > 0, where(),
               "an MoE config needs 0 < top_k <= n_experts and moe_ffn_dim > 0; got top_k ",
               top_k, ", n_experts ", n_experts, ", moe_ffn_dim ", moe_ffn_dim);
  // A dense model has no router for these to act on.
  for (auto [key, value] : {std::pair{"router_z_loss_coef", router_z_loss_coef},
                            {"router_bias_update_rate", router_bias_update_rate}})
    KILN_CHECK(is_moe() || value == 0, where(), key, " = ", value,
               " trains an MoE router, and this model is dense (n_experts = 0)");
}

const ModelConfig& model_config(std::string_view name) {
  const auto& r = registry();
  auto it = r.find(name);
  if (it != r.end()) return it->second;
  std::vector<std::string> names = model_config_names();
  std::string list;
  for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
  fail("unknown model '", name, "'; did you mean '", nearest(name, names),
       "'? Valid models: ", list);
}

std::vector<std::string> model_config_names() {
  std::vector<std::string> names;
  for (const auto& [k, v] : registry()) names.push_back(k);
  return names;
}

int64_t param_count(const ModelConfig& config) { return count(config, false); }
int64_t active_param_count(const ModelConfig& config) { return count(config, true); }

namespace {

// N of flops_per_token: the parameters that are matmul operands.
double matmul_params(const ModelConfig& c) {
  double n = double(active_param_count(c) - c.vocab_size * c.dim);  // less the embedding table
  if (c.tie_embeddings) n += double(c.vocab_size * c.dim);         // the tied LM head is a matmul
  return n;
}

double attention_flops(const ModelConfig& c, int64_t seq_len) {
  KILN_CHECK(seq_len > 0, "flops_per_token: seq_len must be positive, got ", seq_len);
  return 12.0 * double(c.n_layers * c.n_heads * c.head_dim) * double(seq_len);
}

}  // namespace

double flops_per_token(const ModelConfig& c, int64_t seq_len) {
  return 6 * matmul_params(c) + attention_flops(c, seq_len);
}

double lora_flops_per_token(const ModelConfig& c, int64_t seq_len, int64_t adapter_params) {
  return 4 * matmul_params(c) + 6 * double(adapter_params) + attention_flops(c, seq_len);
}

}  // namespace kiln
