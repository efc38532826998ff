// LoRA adapters as a PEFT folder, the form `peft` saves and loads
// (PeftModel.from_pretrained(base, dir)): adapter_config.json (peft_type
// LORA, r, lora_alpha, target_modules, base_model_name_or_path) and
// adapter_model.safetensors, whose tensors are the adapters' kiln names
// behind PEFT's "base_model.model." prefix.
#pragma once
#include <string>

#include "kiln/io/safetensors.h"
#include "kiln/models/lora.h"

namespace kiln::train {

struct PeftAdapter {
  LoraOptions options;
  std::string base_model;  // base_model_name_or_path ("" when unknown)
  nn::StateDict adapters;  // kiln names: "model.layers.0.self_attn.q_proj.lora_A.weight", ...
};

// Writes the folder `dir` atomically (the tensors in `dtype`), with the
// tokenizer's files when `tokenizer_path` is given; an existing `dir` is
// replaced.
void save_peft_adapter(const PeftAdapter& adapter, const std::string& dir, DType dtype,
                       const std::string& tokenizer_path = "");
// Reads a PEFT LoRA folder (f32 tensors); a folder of another PEFT type,
// with a feature kiln's LoRA lacks (bias, DoRA, rsLoRA, modules_to_save,
// per-layer ranks) or tensors that are not LoRA weights is a kiln::Error
// naming the key.
PeftAdapter read_peft_adapter(const std::string& dir);

}  // namespace kiln::train
