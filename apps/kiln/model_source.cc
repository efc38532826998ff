#include "apps/kiln/model_source.h"

#include "kiln/base/error.h"

namespace kiln::cli {

void ModelSource::add_options(CLI::App& cmd) {
  cmd.add_option("--checkpoint", checkpoint,
                 "A kiln run: its dump folder, checkpoint folder or a step-N folder");
  cmd.add_option("--hf", hf, "A Hugging Face model folder (config.json, safetensors, tokenizer)");
  cmd.add_option("--tokenizer", tokenizer, "A tokenizer.json to use instead of the model's");
  cmd.add_option("--dtype", dtype, "The weights' dtype: float32 or bfloat16")->capture_default_str();
}

DType weights_dtype(const std::string& name) {
  const DType d = parse_dtype(name);
  KILN_CHECK(d == DType::f32 || d == DType::bf16, "--dtype must be float32 or bfloat16, got '",
             name, "'");
  return d;
}

void ModelSource::check() const {
  KILN_CHECK(checkpoint.empty() != hf.empty(), "give exactly one of --checkpoint DIR and --hf DIR");
  weights_dtype(dtype);
}

train::SavedModel ModelSource::load() const {
  check();
  const DType d = weights_dtype(dtype);
  return hf.empty() ? train::load_checkpoint_model(checkpoint, tokenizer, d)
                    : train::load_hf_model_dir(hf, tokenizer, d);
}

}  // namespace kiln::cli
