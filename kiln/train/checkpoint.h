// Checkpoints: a folder of step-N directories, each one complete snapshot
//   <folder>/step-N/model.safetensors      parameters by name (their dtypes)
//   <folder>/step-N/optimizer.safetensors  optimizer tensors (AdamW m, v)
//   <folder>/step-N/manifest.json          step, the JSON states (optimizer,
//       scheduler, loader, rng, config) and each file's size and xxh64
// A checkpoint is written into "<folder>/step-N.tmp.<pid>" (every file
// fsync'ed), the manifest last, then renamed to step-N and the folder
// fsync'ed (kiln::AtomicDir), so a directory named step-N is always
// complete; a process killed mid-write leaves only a *.tmp.* directory,
// which loading ignores and the next save removes. Only the latest
// `keep_latest` checkpoints are kept.
//
// Loading verifies sizes and checksums before anything is used: a missing
// or corrupt file is a kiln::Error naming it.
#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kiln/io/safetensors.h"
#include "kiln/ops/random.h"

namespace kiln {
class CausalLM;
}

namespace kiln::train {

struct CheckpointData {
  int64_t step = 0;
  NamedTensors model;      // parameters (f32 masters under mixed precision)
  NamedTensors optimizer;  // e.g. optim::adamw_state_tensors(...)
  nlohmann::json optimizer_state = nlohmann::json::object();  // optim::adamw_state_json
  nlohmann::json scheduler = nlohmann::json::object();        // LRSchedule::to_json
  nlohmann::json loader = nlohmann::json::object();           // DataLoader::to_json
  nlohmann::json rng = nlohmann::json::object();              // rng_to_json
  nlohmann::json config = nlohmann::json::object();           // the run's effective config
};

// Loaded back: tensors by name.
struct LoadedCheckpoint {
  int64_t step = 0;
  std::string path;  // the step-N directory
  std::map<std::string, Tensor> model, optimizer;
  nlohmann::json optimizer_state, scheduler, loader, rng, config;
};

nlohmann::json rng_to_json(const Generator& g);      // {"seed", "offset"}
Generator rng_from_json(const nlohmann::json& j);

class CheckpointManager {
 public:
  // `folder` is created on the first save. keep_latest <= 0 keeps all.
  explicit CheckpointManager(std::string folder, int keep_latest = 0);

  const std::string& folder() const { return folder_; }
  static std::string step_dir_name(int64_t step);  // "step-N"

  // Writes data as step-<data.step> (replacing one of that step), removes
  // stale temporary directories and checkpoints beyond keep_latest.
  // Returns the checkpoint's path.
  std::string save(const CheckpointData& data);

  // Steps of the complete checkpoints (step-N directories with a manifest), ascending.
  std::vector<int64_t> steps() const;
  std::optional<int64_t> latest_step() const;
  // The given step, or the latest when none; kiln::Error when there is no
  // such checkpoint (listing those there are) or a file is missing/corrupt.
  LoadedCheckpoint load(std::optional<int64_t> step = std::nullopt) const;

 private:
  std::string folder_;
  int keep_latest_;
};

// Whether to checkpoint after completing `step` (1-based) of `total`:
// every `interval` steps (interval > 0) and at the end.
bool checkpoint_due(int64_t step, int64_t total, int64_t interval);

// Saves `model` as a Hugging Face directory (save_hf_model: config.json +
// safetensors) and copies the tokenizer's files beside it: tokenizer.json
// (and tokenizer_config.json / special_tokens_map.json when present next to
// it), or vocab.json + merges.txt. `tokenizer_path` is what Tokenizer::load
// accepts; empty skips the tokenizer. Replaces an existing `dir`.
void export_hf(const CausalLM& model, const std::string& tokenizer_path, const std::string& dir);

}  // namespace kiln::train
