// `kiln convert --from SRC --to DST`: a kiln checkpoint to a Hugging Face
// folder, or an HF folder to a kiln checkpoint; the direction is SRC's kind
// (train/convert.h).
#include <iostream>
#include <memory>

#include "apps/kiln/commands.h"
#include "apps/kiln/model_source.h"
#include "kiln/base/error.h"
#include "kiln/train/convert.h"

namespace kiln::cli {
namespace {

struct ConvertArgs {
  std::string from, to, tokenizer, dtype = "float32";
  bool overwrite = false;
};

void convert(const ConvertArgs& a) {
  const DType dtype = weights_dtype(a.dtype);
  const train::Converted c = train::convert_model(a.from, a.to, {dtype, a.tokenizer, a.overwrite});
  std::cout << "converted " << c.description << " to "
            << (c.from == train::ModelFolder::checkpoint ? "a Hugging Face folder"
                                                          : "a kiln checkpoint")
            << " (" << a.dtype << "): " << a.to << std::endl;
}

}  // namespace

void add_convert(CLI::App& app) {
  auto args = std::make_shared<ConvertArgs>();
  auto* cmd = app.add_subcommand(
      "convert", "Convert a kiln checkpoint to a Hugging Face folder, or the other way");
  cmd->add_option("--from", args->from,
                  "A kiln checkpoint (a run's dump folder, checkpoint folder or step-N folder) "
                  "or a Hugging Face folder (config.json)")
      ->required();
  cmd->add_option("--to", args->to, "The folder to write, of the other kind")->required();
  cmd->add_option("--dtype", args->dtype, "The written weights' dtype: float32 or bfloat16")
      ->capture_default_str();
  cmd->add_option("--tokenizer", args->tokenizer, "A tokenizer.json to use instead of SRC's");
  cmd->add_flag("--overwrite", args->overwrite, "Replace DST if it exists");
  cmd->callback([args] { convert(*args); });
}

}  // namespace kiln::cli
