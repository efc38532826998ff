// The model a command reads (`kiln generate`, `kiln eval`): a kiln run's
// checkpoint or a Hugging Face folder, its tokenizer, the dtype and the
// device to run on.
#pragma once
#include <CLI/CLI.hpp>

#include <string>

#include "kiln/train/saved_run.h"

namespace kiln::cli {

// --dtype of a command that writes or runs weights: float32 or bfloat16.
DType weights_dtype(const std::string& name);

struct ModelSource {
  std::string checkpoint, hf, tokenizer, dtype = "float32", device = "cpu";

  void add_options(CLI::App& cmd);
  // Checks the options (exactly one of --checkpoint and --hf; the dtype; the
  // device exists) before anything is loaded.
  void check() const;
  // The model on the host, then its parameters moved to --device (where
  // evaluation and generation follow them).
  train::SavedModel load() const;

 private:
  Device run_device() const;
};

}  // namespace kiln::cli
