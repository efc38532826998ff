#include "kiln/models/hf_config.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kiln/base/error.h"
#include "kiln/io/json_brief.h"

namespace kiln {
namespace {

using json = nlohmann::json;

struct Family {
  const char* family;        // ModelConfig::family
  const char* architecture;  // config.json "architectures"
  const char* model_type;    // config.json "model_type"
};
constexpr Family kFamilies[] = {
    {"llama3", "LlamaForCausalLM", "llama"},
    {"qwen3", "Qwen3ForCausalLM", "qwen3"},
    {"qwen3_moe", "Qwen3MoeForCausalLM", "qwen3_moe"},
};

std::string supported_architectures() {
  std::string s;
  for (const Family& f : kFamilies) s += cat(s.empty() ? "" : ", ", f.architecture);
  return s;
}

struct DTypeName {
  const char* name;
  DType dtype;
};
constexpr DTypeName kTorchDTypes[] = {{"float32", DType::f32},
                                      {"bfloat16", DType::bf16},
                                      {"float16", DType::f16},
                                      {"float64", DType::f64}};

// Typed access to config.json keys; an absent or null key takes the
// transformers default, a value of the wrong type is an error naming it.
class Keys {
 public:
  Keys(const json& j, std::string source) : j_(j), source_(std::move(source)) {}

  bool has(const char* key) const { return j_.contains(key) && !j_.at(key).is_null(); }
  const json& at(const char* key) const { return j_.at(key); }

  int64_t integer(const char* key, int64_t def) const {
    if (!has(key)) return def;
    const json& v = j_.at(key);
    KILN_CHECK(v.is_number_integer(), where(key), "must be an integer, got ", json_brief(v));
    return v.get<int64_t>();
  }
  double number(const char* key, double def) const {
    if (!has(key)) return def;
    const json& v = j_.at(key);
    KILN_CHECK(v.is_number(), where(key), "must be a number, got ", json_brief(v));
    return v.get<double>();
  }
  bool boolean(const char* key, bool def) const {
    if (!has(key)) return def;
    const json& v = j_.at(key);
    KILN_CHECK(v.is_boolean(), where(key), "must be true or false, got ", json_brief(v));
    return v.get<bool>();
  }
  std::string string(const char* key, const std::string& def) const {
    if (!has(key)) return def;
    const json& v = j_.at(key);
    KILN_CHECK(v.is_string(), where(key), "must be a string, got ", json_brief(v));
    return v.get<std::string>();
  }
  // The key must be absent, null or `expected` (a feature kiln lacks otherwise).
  template <class T>
  void require(const char* key, const T& expected, const char* why) const {
    if (!has(key)) return;
    const json& v = j_.at(key);
    KILN_CHECK(v == json(expected), where(key), json_brief(v), " is not supported: ", why);
  }
  std::string where(const std::string& key) const { return cat(source_, ": \"", key, "\" "); }
  const std::string& source() const { return source_; }

 private:
  const json& j_;
  std::string source_;
};

const Family& detect_family(const Keys& k) {
  std::string model_type = k.string("model_type", "");
  const Family* by_arch = nullptr;
  if (k.has("architectures")) {
    const json& a = k.at("architectures");
    KILN_CHECK(a.is_array() && !a.empty() && a[0].is_string(), k.where("architectures"),
               "must be a non-empty list of class names, got ", json_brief(a));
    std::string arch = a[0].get<std::string>();
    for (const Family& f : kFamilies)
      if (arch == f.architecture) by_arch = &f;
    KILN_CHECK(by_arch, k.source(), ": architecture '", arch, "' is not supported; kiln loads ",
               supported_architectures());
    KILN_CHECK(model_type.empty() || model_type == by_arch->model_type, k.source(),
               ": model_type '", model_type, "' contradicts architecture '", arch,
               "' (expected model_type '", by_arch->model_type, "')");
    return *by_arch;
  }
  for (const Family& f : kFamilies)
    if (model_type == f.model_type) return f;
  fail(k.source(), ": cannot tell the architecture: no \"architectures\" and model_type '",
       model_type, "' is not one of llama, qwen3, qwen3_moe; kiln loads ",
       supported_architectures());
}

// RoPE: theta and the optional Llama 3.1 scaling, from either the classic
// keys (rope_theta + rope_scaling) or transformers 5's rope_parameters.
void read_rope(const Keys& k, double default_theta, ModelConfig& c) {
  c.rope_theta = k.number("rope_theta", default_theta);
  const char* key = k.has("rope_parameters") ? "rope_parameters" : "rope_scaling";
  if (!k.has(key)) return;
  const json& r = k.at(key);
  KILN_CHECK(r.is_object(), k.where(key), "must be an object, got ", json_brief(r));
  Keys rk(r, cat(k.source(), ": \"", key, "\""));
  KILN_CHECK(rk.has("rope_type") || rk.has("type") || rk.has("rope_theta"), k.where(key),
             "has no rope_type; per-layer-type RoPE parameters are not supported");
  if (rk.has("rope_theta")) c.rope_theta = rk.number("rope_theta", c.rope_theta);
  std::string type =
      rk.has("rope_type") ? rk.string("rope_type", "") : rk.string("type", "default");
  if (type == "default") return;
  KILN_CHECK(type == "llama3", k.where(key), "rope_type '", type,
             "' is not supported; kiln implements default and llama3");
  for (const char* f :
       {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"})
    KILN_CHECK(rk.has(f), k.where(key), "with rope_type llama3 needs \"", f, "\"");
  c.rope_scaling = Llama31Scaling{rk.number("factor", 0), rk.number("low_freq_factor", 0),
                                  rk.number("high_freq_factor", 0),
                                  rk.integer("original_max_position_embeddings", 0)};
}

void reject_unsupported(const Keys& k) {
  k.require("hidden_act", "silu", "kiln's MLPs use SiLU (SwiGLU)");
  k.require("attention_dropout", 0, "kiln has no attention dropout");  // 0 == 0.0 in JSON
  k.require("mlp_bias", false, "kiln's MLPs have no bias");
  k.require("use_sliding_window", false, "sliding-window layers are not implemented for HF models");
  KILN_CHECK(!k.has("quantization_config"), k.source(),
             ": quantized checkpoints (quantization_config) are not supported");
  if (k.has("layer_types")) {
    const json& lt = k.at("layer_types");
    KILN_CHECK(lt.is_array(), k.where("layer_types"), "must be a list");
    for (const json& t : lt)
      KILN_CHECK(t == "full_attention", k.where("layer_types"), "entry ", json_brief(t),
                 " is not supported: kiln loads full-attention layers only");
  }
}

}  // namespace

namespace {

std::vector<int32_t> eos_ids(const json& j, const std::string& source) {
  std::vector<int32_t> ids;
  if (!j.contains("eos_token_id") || j["eos_token_id"].is_null()) return ids;
  const json& v = j["eos_token_id"];
  for (const json& id : v.is_array() ? v : json::array({v})) {
    KILN_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0 &&
                   id.get<int64_t>() <= std::numeric_limits<int32_t>::max(),
               source, ": \"eos_token_id\" must be a token id or a list of them, got ",
               json_brief(v));
    ids.push_back(id.get<int32_t>());
  }
  return ids;
}

json parse_object(std::string_view text, const std::string& source) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    fail(source, ": not valid JSON: ", e.what());
  }
  KILN_CHECK(j.is_object(), source, ": must be a JSON object");
  return j;
}

}  // namespace

std::vector<int32_t> parse_eos_token_ids(std::string_view text, const std::string& source) {
  return eos_ids(parse_object(text, source), source);
}

HfConfig parse_hf_config(std::string_view text, const std::string& source) {
  json j = parse_object(text, source);
  Keys k(j, source);
  const Family& f = detect_family(k);
  reject_unsupported(k);
  std::string fam = f.family;
  bool moe = fam == "qwen3_moe";

  HfConfig out;
  out.architecture = f.architecture;
  ModelConfig& c = out.model;
  c.name = source;
  c.family = fam;
  // Defaults are those of LlamaConfig, Qwen3Config and Qwen3MoeConfig.
  c.vocab_size = k.integer("vocab_size", fam == "llama3" ? 32000 : 151936);
  c.dim = k.integer("hidden_size", moe ? 2048 : 4096);
  c.ffn_dim = k.integer("intermediate_size", fam == "llama3" ? 11008 : moe ? 6144 : 22016);
  c.n_layers = k.integer("num_hidden_layers", moe ? 24 : 32);
  c.n_heads = k.integer("num_attention_heads", 32);
  c.n_kv_heads = k.integer("num_key_value_heads", moe ? 4 : c.n_heads);
  KILN_CHECK(c.n_heads > 0, k.where("num_attention_heads"), "must be positive");
  c.head_dim = k.integer("head_dim", fam == "qwen3" ? 128 : c.dim / c.n_heads);
  c.max_position_embeddings = k.integer("max_position_embeddings", fam == "llama3" ? 2048 : 32768);
  c.seq_len = std::min<int64_t>(c.max_position_embeddings, 4096);
  c.init_std = k.number("initializer_range", 0.02);
  c.norm_eps = k.number("rms_norm_eps", 1e-6);
  c.tie_embeddings = k.boolean("tie_word_embeddings", false);
  c.attention_bias = k.boolean("attention_bias", false);
  c.qk_norm = fam != "llama3";
  read_rope(k, 10000, c);

  if (moe) {
    c.n_experts =
        k.has("num_experts") ? k.integer("num_experts", 0) : k.integer("num_local_experts", 128);
    c.top_k = k.integer("num_experts_per_tok", 8);
    c.moe_ffn_dim = k.integer("moe_intermediate_size", 768);
    c.norm_topk_prob = k.boolean("norm_topk_prob", false);
    c.decoder_sparse_step = k.integer("decoder_sparse_step", 1);
    c.router_aux_loss_coef = k.number("router_aux_loss_coef", 0.001);
    if (k.has("mlp_only_layers")) {
      const json& m = k.at("mlp_only_layers");
      KILN_CHECK(m.is_array(), k.where("mlp_only_layers"), "must be a list of layer indices");
      for (const json& l : m) {
        KILN_CHECK(l.is_number_integer() && l.get<int64_t>() >= 0 && l.get<int64_t>() < c.n_layers,
                   k.where("mlp_only_layers"), "entry ", json_brief(l),
                   " is not a layer index in [0, ", c.n_layers, ")");
        c.mlp_only_layers.push_back(l.get<int64_t>());
      }
    }
  }

  out.eos_token_ids = eos_ids(j, source);
  std::string dt = k.has("dtype") ? k.string("dtype", "") : k.string("torch_dtype", "");
  for (const auto& d : kTorchDTypes)
    if (dt == d.name) out.dtype = d.dtype;

  c.validate();
  return out;
}

HfConfig read_hf_config(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  KILN_CHECK(f.good(), "cannot open Hugging Face config '", path, "'");
  std::ostringstream ss;
  ss << f.rdbuf();
  return parse_hf_config(ss.str(), path);
}

const char* hf_architecture(const ModelConfig& config) {
  for (const Family& f : kFamilies)
    if (config.family == f.family) return f.architecture;
  fail("model config '", config.name, "': family '", config.family,
       "' has no Hugging Face architecture");
}

std::string hf_config_json(const ModelConfig& c, DType dtype) {
  c.validate();
  const Family* f = nullptr;
  for (const Family& x : kFamilies)
    if (c.family == x.family) f = &x;
  KILN_CHECK(f, "model config '", c.name, "': family '", c.family, "' has no HF architecture");
  bool llama = c.family == "llama3", moe = c.family == "qwen3_moe";
  KILN_CHECK(
      c.qk_norm != llama, "model config '", c.name, "': ", f->architecture,
      llama ? " has no q/k norm but qk_norm is set" : " always has q/k norm but qk_norm is off");
  KILN_CHECK(moe == c.is_moe(), "model config '", c.name, "': family ", c.family,
             moe ? " needs n_experts > 0" : " cannot have experts");
  const char* torch_dtype = nullptr;
  for (const auto& d : kTorchDTypes)
    if (d.dtype == dtype) torch_dtype = d.name;
  KILN_CHECK(torch_dtype, "hf_config_json: weights of dtype ", dtype_name(dtype),
             " are not a floating type");

  nlohmann::ordered_json j;
  j["architectures"] = {f->architecture};
  j["model_type"] = f->model_type;
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.dim;
  j["intermediate_size"] = c.ffn_dim;
  j["num_hidden_layers"] = c.n_layers;
  j["num_attention_heads"] = c.n_heads;
  j["num_key_value_heads"] = c.n_kv_heads;
  j["head_dim"] = c.head_dim;
  j["hidden_act"] = "silu";
  j["max_position_embeddings"] =
      c.max_position_embeddings > 0 ? c.max_position_embeddings : c.seq_len;
  j["initializer_range"] = c.init_std;
  j["rms_norm_eps"] = c.norm_eps;
  j["tie_word_embeddings"] = c.tie_embeddings;
  j["rope_theta"] = c.rope_theta;
  if (c.rope_scaling) {
    j["rope_scaling"] = {
        {"rope_type", "llama3"},
        {"factor", c.rope_scaling->factor},
        {"low_freq_factor", c.rope_scaling->low_freq_factor},
        {"high_freq_factor", c.rope_scaling->high_freq_factor},
        {"original_max_position_embeddings", c.rope_scaling->original_max_position_embeddings}};
  } else {
    j["rope_scaling"] = nullptr;
  }
  j["attention_bias"] = c.attention_bias;
  j["attention_dropout"] = 0.0;
  if (llama) {
    j["mlp_bias"] = false;
  } else {
    j["use_sliding_window"] = false;
    j["sliding_window"] = nullptr;
    j["max_window_layers"] = c.n_layers;
  }
  if (moe) {
    j["num_experts"] = c.n_experts;
    j["num_experts_per_tok"] = c.top_k;
    j["moe_intermediate_size"] = c.moe_ffn_dim;
    j["norm_topk_prob"] = c.norm_topk_prob;
    j["decoder_sparse_step"] = c.decoder_sparse_step;
    j["mlp_only_layers"] = c.mlp_only_layers;
    j["router_aux_loss_coef"] = c.router_aux_loss_coef;
    j["output_router_logits"] = false;
  }
  j["use_cache"] = true;
  j["torch_dtype"] = torch_dtype;
  return j.dump(2) + "\n";
}

}  // namespace kiln
