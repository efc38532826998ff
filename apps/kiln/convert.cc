// `kiln convert --from SRC --to DST`: a kiln checkpoint to a Hugging Face
// folder, or an HF folder to a kiln checkpoint; the direction is SRC's kind
// (train/convert.h). A LoRA run's checkpoint gives a PEFT adapter folder,
// or with --merge-lora (also from a PEFT folder) a merged HF folder.
#include <iostream>
#include <memory>

#include "apps/kiln/commands.h"
#include "apps/kiln/model_source.h"
#include "kiln/base/error.h"
#include "kiln/train/convert.h"

namespace kiln::cli {
namespace {

struct ConvertArgs {
  std::string from, to, tokenizer, base, dtype = "float32";
  bool overwrite = false, merge_lora = false;
};

const char* folder_text(train::ModelFolder kind) {
  switch (kind) {
    case train::ModelFolder::hugging_face: return "a Hugging Face folder";
    case train::ModelFolder::checkpoint: return "a kiln checkpoint";
    case train::ModelFolder::peft_adapter: return "a PEFT adapter folder";
  }
  return "";
}

void convert(const ConvertArgs& a) {
  const DType dtype = weights_dtype(a.dtype);
  const train::Converted c =
      train::convert_model(a.from, a.to, {dtype, a.tokenizer, a.overwrite, a.merge_lora, a.base});
  std::cout << "converted " << c.description << " to " << folder_text(c.to) << " (" << a.dtype
            << "): " << a.to << std::endl;
}

}  // namespace

void add_convert(CLI::App& app) {
  auto args = std::make_shared<ConvertArgs>();
  auto* cmd = app.add_subcommand(
      "convert", "Convert a kiln checkpoint to a Hugging Face folder, or the other way");
  cmd->add_option("--from", args->from,
                  "A kiln checkpoint (a run's dump folder, checkpoint folder or step-N folder) "
                  "or a Hugging Face folder (config.json), or with --merge-lora a PEFT adapter "
                  "folder (adapter_config.json)")
      ->required();
  cmd->add_option("--to", args->to, "The folder to write, of the other kind")->required();
  cmd->add_option("--dtype", args->dtype, "The written weights' dtype: float32 or bfloat16")
      ->capture_default_str();
  cmd->add_option("--tokenizer", args->tokenizer, "A tokenizer.json to use instead of SRC's");
  cmd->add_flag("--overwrite", args->overwrite, "Replace DST if it exists");
  cmd->add_flag("--merge-lora", args->merge_lora,
                "Merge LoRA adapters (of a LoRA run's checkpoint, or a PEFT folder) into their "
                "base model and write it as a Hugging Face folder; without it a LoRA run's "
                "checkpoint becomes a PEFT adapter folder");
  cmd->add_option("--base", args->base,
                  "The Hugging Face folder a PEFT folder's adapters apply to, instead of its "
                  "base_model_name_or_path");
  cmd->callback([args] { convert(*args); });
}

}  // namespace kiln::cli
