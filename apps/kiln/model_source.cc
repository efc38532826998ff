#include "apps/kiln/model_source.h"

#include "kiln/base/error.h"
#include "kiln/runtime/backend.h"

namespace kiln::cli {

void ModelSource::add_options(CLI::App& cmd) {
  cmd.add_option("--checkpoint", checkpoint,
                 "A kiln run: its dump folder, checkpoint folder or a step-N folder");
  cmd.add_option("--hf", hf, "A Hugging Face model folder (config.json, safetensors, tokenizer)");
  cmd.add_option("--tokenizer", tokenizer, "A tokenizer.json to use instead of the model's");
  cmd.add_option("--dtype", dtype, "The weights' dtype: float32 or bfloat16")->capture_default_str();
  cmd.add_option("--device", device, "Where the model runs: cpu, cuda or cuda:N")
      ->capture_default_str();
}

Device ModelSource::run_device() const {
  try {
    const Device d = parse_device(device);
    backend(d);  // it exists
    return d;
  } catch (const Error& e) {
    fail("--device ", device, ": ", e.what());
  }
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
  run_device();
}

train::SavedModel ModelSource::load() const {
  check();
  const DType d = weights_dtype(dtype);
  train::SavedModel m = hf.empty() ? train::load_checkpoint_model(checkpoint, tokenizer, d)
                                   : train::load_hf_model_dir(hf, tokenizer, d);
  if (const Device where = run_device(); where != kCPU) {
    std::vector<Tensor> moved;
    for (const Tensor& p : m.model->parameters()) moved.push_back(p.to(where));
    m.model->set_parameters(moved);
  }
  return m;
}

}  // namespace kiln::cli
