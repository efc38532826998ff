// Hugging Face config.json <-> ModelConfig for LlamaForCausalLM,
// Qwen3ForCausalLM and Qwen3MoeForCausalLM.
//
// Reading accepts both the classic hub layout (rope_theta, rope_scaling,
// num_experts) and the transformers >= 5 one (rope_parameters,
// num_local_experts); a key that is absent takes the transformers class's
// default. A feature kiln does not implement (another activation, MLP bias,
// sliding-window layers, a RoPE type other than default/llama3, dropout,
// quantization, ...) is a kiln::Error naming the key, never silently
// dropped. Writing emits the classic layout, which every transformers
// version reads.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/base/dtype.h"
#include "kiln/models/config.h"

namespace kiln {

struct HfConfig {
  ModelConfig model;
  std::string architecture;    // e.g. "LlamaForCausalLM"
  std::optional<DType> dtype;  // "dtype" / "torch_dtype", when present and known
  std::vector<int32_t> eos_token_ids;  // "eos_token_id": none, one or several
};

// Parses config.json text; `source` names it in errors (a path, usually).
// The model's name is `source`; its seq_len (a training setting HF does not
// record) is min(max_position_embeddings, 4096).
HfConfig parse_hf_config(std::string_view json_text, const std::string& source = "config.json");
HfConfig read_hf_config(const std::string& path);

// The "eos_token_id" of a config.json or generation_config.json text: an
// id, a list of ids, or none (absent or null); kiln::Error naming `source`
// otherwise.
std::vector<int32_t> parse_eos_token_ids(std::string_view json_text, const std::string& source);

// "LlamaForCausalLM" | "Qwen3ForCausalLM" | "Qwen3MoeForCausalLM" for the
// config's family.
const char* hf_architecture(const ModelConfig& config);

// config.json text (pretty-printed) for `config`, with `dtype` as the
// weights' dtype. Throws when the config cannot be expressed.
std::string hf_config_json(const ModelConfig& config, DType dtype = DType::f32);

}  // namespace kiln
