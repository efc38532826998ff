// A trained model read back for inference (`kiln generate`): from a run's
// checkpoint, found from its dump folder, its checkpoint folder or a step-N
// folder, or from a Hugging Face model folder.
#pragma once
#include <memory>
#include <optional>
#include <variant>
#include <string>
#include <vector>

#include "kiln/data/tokenizer.h"
#include "kiln/models/transformer.h"
#include "kiln/train/peft_adapter.h"

namespace kiln::train {

struct SavedModel {
  std::unique_ptr<CausalLM> model;
  std::unique_ptr<Tokenizer> tokenizer;
  std::string tokenizer_path;  // the tokenizer.json (or folder) it was loaded from
  std::string description;  // e.g. "outputs/x/checkpoint/step-20 (llama3_debug)"
  // Where generation ends: the eos_token_id of config.json and of
  // generation_config.json (an HF folder, or the one a fine-tune started
  // from), else the tokenizer's end-of-text token.
  std::vector<int32_t> eos_ids;
};

// The model of a checkpoint with the run's tokenizer: the one its
// manifest records, else one in the step folder or the two folders above it
// (tokenizer.json, or vocab.json + merges.txt: a fine-tune's run copies its
// folder's there). A fine-tune's architecture is the one its manifest
// records, not its folder's (which may be gone). `tokenizer_path`, when
// given, is used instead.
// `dtype`: the parameters' (the checkpoint's f32 masters are rounded to it).
// A LoRA run's checkpoint holds its adapters only: they are merged into
// the base model it started from (checkpoint.initial_load_path, read
// again; without one, the model its seed drew).
SavedModel load_checkpoint_model(const std::string& dir, const std::string& tokenizer_path = "",
                                 DType dtype = DType::f32);
// A LoRA run's adapters, with its tokenizer's path (found as
// load_checkpoint_model finds it).
struct SavedAdapter {
  PeftAdapter adapter;
  std::string tokenizer_path;
  std::string description;
};
// A checkpoint read once for export: a LoRA run's adapters unless
// `merge_lora`, else the model (a LoRA run's merged). `merge_lora` on a
// run without LoRA is a kiln::Error.
std::variant<SavedModel, SavedAdapter> load_checkpoint_for_export(
    const std::string& dir, const std::string& tokenizer_path, DType dtype, bool merge_lora);
// A PEFT LoRA folder merged into its base model (the folder's
// base_model_name_or_path, or `base` when given: a Hugging Face folder).
// The tokenizer is `tokenizer_path`, else the adapter folder's, else the
// base's; null when none of them has one.
SavedModel load_peft_merged(const std::string& adapter_dir, const std::string& base = "",
                            const std::string& tokenizer_path = "", DType dtype = DType::f32);
// The eos_token_id of an HF folder's config.json and generation_config.json.
std::vector<int32_t> hf_folder_eos_ids(const std::string& dir);
// A Hugging Face folder: config.json, safetensors and its tokenizer (or
// `tokenizer_path`), the weights converted to `dtype`.
SavedModel load_hf_model_dir(const std::string& dir, const std::string& tokenizer_path = "",
                             DType dtype = DType::f32);

}  // namespace kiln::train
