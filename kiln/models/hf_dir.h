// Hugging Face model directories: config.json plus the weights, either one
// model.safetensors or shards model-0000x-of-0000y.safetensors listed by
// model.safetensors.index.json ({"metadata": {"total_size": N},
// "weight_map": {tensor name: shard file}}).
//
// Weights on disk use the hub layout, in which each MoE expert is its own
// set of Linear weights (mlp.experts.{e}.{gate,up,down}_proj.weight); kiln's
// MoE (like transformers >= 5 in memory) stacks them into
// mlp.experts.gate_up_proj [E, 2 * ffn, dim] and mlp.experts.down_proj
// [E, dim, ffn]. Loading accepts either layout; saving writes the hub one,
// which every transformers version reads.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "kiln/io/safetensors.h"
#include "kiln/models/transformer.h"

namespace kiln {

// Every tensor of the directory's weight files, by name, in the files' dtypes.
// Throws kiln::Error naming the directory (and file, and tensor) on a missing
// file, a corrupt shard or index, or a name the index maps to a shard that
// lacks it.
nn::StateDict read_hf_weights(const std::string& dir);

// Hub layout -> kiln parameter names: stacks per-expert weights (checking
// every expert is present with shape [moe_ffn_dim, dim] / [dim, moe_ffn_dim]),
// drops a tied model's redundant lm_head.weight and, for a config with a
// routing bias, adds zero biases the hub layout lacks. Entries are
// converted to `dtype`. Other names pass through unchanged.
nn::StateDict hf_to_kiln_state_dict(nn::StateDict hf, const ModelConfig& config, DType dtype);
// kiln parameters -> hub layout (per-expert weights as views, no copies).
NamedTensors kiln_to_hf_tensors(const CausalLM& model);

// Loads the directory's weights into `model` (all problems in one error:
// missing, unexpected and mis-shaped tensors), converting to its dtype.
void load_hf_weights(CausalLM& model, const std::string& dir);
// Builds a model from config.json (in `dtype`) and loads its weights.
std::unique_ptr<CausalLM> load_hf_model(const std::string& dir, DType dtype = DType::f32);

struct HfSaveOptions {
  // Shards hold at most this many bytes (one tensor larger than this gets a
  // shard of its own); a model that fits in one is saved as model.safetensors
  // without an index. transformers' default is 5 GB.
  uint64_t max_shard_bytes = 5'000'000'000;
  // Replace an existing directory whole (its other files, e.g. a tokenizer,
  // are lost). Without it an existing `dir` is an error.
  bool overwrite = false;
};

// Writes config.json and the weights (in the parameters' dtype) into `dir`
// atomically (a model with a routing bias, which the hub classes lack, is
// refused): everything is written to a temporary directory beside it,
// which is then renamed into place. Missing parent directories are created.
void save_hf_model(const CausalLM& model, const std::string& dir,
                   const HfSaveOptions& options = {});

}  // namespace kiln
