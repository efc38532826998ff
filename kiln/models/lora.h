// LoRA on a CausalLM: which of its Linear layers get an adapter (the
// targets, by PEFT's short names), the adapters' parameter names, and an
// adapter's product folded back into its base weight.
//
// Targets: q, k, v, o (attention projections) and gate, up, down (the dense
// MLP's); the Linear "model.layers.{i}.self_attn.q_proj" gets the
// parameters ".lora_A.weight" [rank, in] and ".lora_B.weight" [out, rank],
// the names PEFT saves (behind its "base_model.model." prefix). An MoE
// layer's experts are stacked tensors, not Linear layers: gate, up and down
// reach the dense layers only.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/models/transformer.h"

namespace kiln {

struct LoraOptions {
  int64_t rank = 0;  // 0: no adapters
  double alpha = 16;  // the adapters' output is scaled by alpha / rank
  std::vector<std::string> targets;  // short names: q, k, v, o, gate, up, down
  double scale() const { return alpha / double(rank); }
};

// The short names a target list may hold, in PEFT's module order.
const std::vector<std::string>& lora_target_names();
// "q,k,v,o" -> {"q", "k", "v", "o"}; an unknown or repeated name, or an
// empty list, is a kiln::Error naming it and the choices.
std::vector<std::string> parse_lora_targets(std::string_view list);
// The module name PEFT matches for a short name ("q" -> "q_proj").
std::string lora_module_name(const std::string& target);

// Adds an adapter to every target Linear of `model` (A drawn from `g`);
// returns how many. A target that names no layer of the model (gate on a
// model whose every MLP is a mixture of experts) is a kiln::Error.
int64_t add_lora(CausalLM& model, const LoraOptions& options, Generator& g);

// Whether a parameter name is an adapter's (".lora_A." / ".lora_B.").
bool is_lora_parameter(const std::string& name);

// The base weights with every adapter of `adapters` folded in: W + scale *
// B @ A, computed in f32 and rounded to W's dtype. `adapters` holds
// "<module>.lora_A.weight" / "<module>.lora_B.weight" pairs whose module's
// "<module>.weight" is in `weights`; anything else is a kiln::Error.
nn::StateDict merge_lora(nn::StateDict weights, const nn::StateDict& adapters, double scale);

}  // namespace kiln
