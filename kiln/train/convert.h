// `kiln convert`: a kiln checkpoint <-> a Hugging Face model folder.
//
// A checkpoint (a run's dump folder, checkpoint folder or step-N folder, as
// load_checkpoint_model finds it; sharded ones included) becomes an HF
// folder through export_hf: config.json, safetensors weights,
// generation_config.json and the tokenizer's files. An HF folder becomes a
// kiln checkpoint folder holding one checkpoint, step-0, whose manifest
// records the architecture (with the folder's eos ids) the way a
// fine-tune's does, plus the folder's tokenizer files: `kiln generate`,
// `kiln eval` and `kiln convert` read it with --checkpoint / --from.
// A LoRA run's checkpoint becomes a PEFT adapter folder (peft_adapter.h),
// or with merge_lora an HF folder of the base model with the adapters
// merged in; a PEFT folder (adapter_config.json) becomes such a merged HF
// folder (merge_lora only).
// Either way the destination is built beside itself and renamed into place.
#pragma once
#include <string>

#include "kiln/base/dtype.h"

namespace kiln::train {

enum class ModelFolder { hugging_face, checkpoint, peft_adapter };

// What `dir` holds: config.json makes it a Hugging Face folder,
// adapter_config.json a PEFT adapter folder; a manifest.json, step-N
// folders with one, or a dump folder's config.toml a checkpoint.
// kiln::Error naming `dir` otherwise.
ModelFolder model_folder_kind(const std::string& dir);

struct ConvertOptions {
  DType dtype = DType::f32;    // of the written weights
  std::string tokenizer_path;  // instead of the source's
  bool overwrite = false;      // replace an existing destination
  bool merge_lora = false;     // LoRA adapters -> a merged HF folder
  std::string base;            // a PEFT folder's base model, instead of the one it names
};

struct Converted {
  ModelFolder from, to;     // what was read and what was written
  std::string description;  // e.g. "out/x/checkpoint/step-20 (llama3_debug, step 20)"
};

// Converts `from` into the other kind at `to`.
Converted convert_model(const std::string& from, const std::string& to,
                        const ConvertOptions& options);

}  // namespace kiln::train
