// LoRA adapters as a PEFT folder, the form `peft` saves and loads
// (PeftModel.from_pretrained(base, dir)): adapter_config.json (peft_type
// LORA, r, lora_alpha, target_modules, base_model_name_or_path) and
// adapter_model.safetensors, whose tensors are the adapters' kiln names
// behind PEFT's "base_model.model." prefix.
#pragma once
#include <string>
#include <string_view>

#include "kiln/io/safetensors.h"
#include "kiln/models/lora.h"
#include "kiln/train/config.h"

namespace kiln::train {

struct PeftAdapter {
  LoraOptions options;
  std::string base_model;  // base_model_name_or_path ("" when unknown)
  nn::StateDict adapters;  // kiln names: "model.layers.0.self_attn.q_proj.lora_A.weight", ...
};

// A LoRA run's adapters (kiln names) as a PEFT adapter: the run's [lora]
// options, its checkpoint.initial_load_path (absolute) as the base model.
PeftAdapter run_adapter(const TrainConfig& config, nn::StateDict adapters);

// Writes the folder `dir` atomically (the tensors in `dtype`), with the
// tokenizer's files when `tokenizer_path` is given; an existing `dir` is
// replaced.
void save_peft_adapter(const PeftAdapter& adapter, const std::string& dir, DType dtype,
                       const std::string& tokenizer_path = "");
// Reads a PEFT LoRA folder (f32 tensors); tensors that are not LoRA
// weights are a kiln::Error naming them.
PeftAdapter read_peft_adapter(const std::string& dir);

// adapter_config.json's text for `adapter` (its options and base model)...
std::string peft_config_json(const PeftAdapter& adapter);
// ...and back (no tensors): another PEFT type, or a feature kiln's LoRA
// lacks (bias, DoRA, rsLoRA, modules_to_save, per-layer ranks), is a
// kiln::Error naming the key; `where` names the text in errors.
PeftAdapter parse_peft_config(std::string_view text, const std::string& where);

}  // namespace kiln::train
