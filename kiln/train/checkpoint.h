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
//
// Sharded (SimpleFSDP over N ranks): the tensors are saved as N file pairs
// model-0000i-of-0000N.safetensors / optimizer-..., each written by the rank
// holding shard i (rows [i k, (i + 1) k) of every tensor's dim 0 padded to
// N k), all into one temporary directory that the manifest (listing every
// file) then publishes. Loading concatenates the shards and drops the
// padding: a checkpoint comes back as full tensors, which any mesh shards
// its own way (FSDP 4 -> FSDP 2 -> one rank).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kiln/io/safetensors.h"
#include "kiln/ops/random.h"

namespace kiln {
class AtomicDir;
class CausalLM;
}

namespace kiln::train {

struct CheckpointData {
  int64_t step = 0;
  NamedTensors model;      // parameters (f32 masters under mixed precision)
  NamedTensors optimizer;  // e.g. optim::adamw_state_tensors(...)
  // Set by on_host(): model and optimizer copied to host memory (the two
  // above then empty), written from there without touching a device.
  struct HostCopy {
    NamedHostTensors model, optimizer;
  };
  std::optional<HostCopy> host;
  nlohmann::json optimizer_state = nlohmann::json::object();  // optim::adamw_state_json
  nlohmann::json scheduler = nlohmann::json::object();        // LRSchedule::to_json
  nlohmann::json loader = nlohmann::json::object();           // DataLoader::to_json
  nlohmann::json rng = nlohmann::json::object();              // rng_to_json
  nlohmann::json config = nlohmann::json::object();           // the run's effective config
  // Sharded: model and optimizer hold shard `shard_index` of `shard_count`,
  // and full_rows names every tensor's unpadded dim 0.
  int64_t shard_index = 0, shard_count = 1;
  std::map<std::string, int64_t> full_rows;

  // This data with its tensors copied to host memory now: what a save on
  // another thread writes while training goes on changing the tensors.
  // Into `reuse`'s host buffers, an earlier copy's, where they fit
  // (copy_to_host).
  CheckpointData on_host() const;
  CheckpointData on_host(CheckpointData reuse) const;
};

// What one writer wrote: its files' sizes and xxh64 checksums, for the manifest.
struct ShardDigest {
  int64_t index = -1;  // the shard; -1: this rank wrote none (a replica)
  uint64_t model_bytes = 0, model_hash = 0, optimizer_bytes = 0, optimizer_hash = 0;
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
  // Returns the checkpoint's path. One writer: begin, write_shard, commit.
  std::string save(const CheckpointData& data);

  // A save by several writers (processes sharing the folder): one of them
  // begin()s, which makes the temporary directory and returns its path;
  // each writer write_shard()s its shard into it; the first commit()s with
  // every shard's digest (any order), writing the manifest and publishing
  // the step. Without commit() the temporary directory is removed when this
  // manager is destroyed (or by a later save, once its process is gone).
  std::string begin(int64_t step);
  ShardDigest write_shard(const std::string& temp_dir, const CheckpointData& data) const;
  std::string commit(const CheckpointData& data, const std::vector<ShardDigest>& shards);

  // Steps of the complete checkpoints (step-N directories with a manifest), ascending.
  std::vector<int64_t> steps() const;
  std::optional<int64_t> latest_step() const;
  // Step-N directories without a manifest (damaged: a save publishes its
  // directory only with one), ascending: resuming passes over them.
  std::vector<int64_t> steps_without_manifest() const;
  // The given step, or the latest when none; kiln::Error when there is no
  // such checkpoint (listing those there are) or a file is missing/corrupt.
  LoadedCheckpoint load(std::optional<int64_t> step = std::nullopt) const;

 private:
  std::vector<int64_t> step_dirs(bool with_manifest) const;

  std::string folder_;
  int keep_latest_;
  std::shared_ptr<AtomicDir> pending_;  // begun, not committed
};

// Whether to checkpoint after completing `step` (1-based) of `total`:
// every `interval` steps (interval > 0) and at the end.
bool checkpoint_due(int64_t step, int64_t total, int64_t interval);

// Saves `model` as a Hugging Face directory (save_hf_model: config.json +
// safetensors) with the tokenizer's files beside it (copy_tokenizer_files)
// and generation_config.json: the tokenizer's
// document-start token as bos_token_id, `eos_ids` (empty: the tokenizer's
// end-of-text token) as eos_token_id. `tokenizer_path` is what
// Tokenizer::load accepts; empty skips the tokenizer. The directory is
// built beside `dir` and renamed into place, replacing an existing one.
void export_hf(const CausalLM& model, const std::string& tokenizer_path, const std::string& dir,
               const std::vector<int32_t>& eos_ids = {});
// Copies the files of the tokenizer at `tokenizer_path` (a tokenizer.json,
// a vocab.json with merges.txt beside it, or a folder holding either) into
// `dir`, with the tokenizer_config.json, special_tokens_map.json and
// chat_template.jinja beside them, creating `dir`.
void copy_tokenizer_files(const std::string& tokenizer_path, const std::string& dir);

}  // namespace kiln::train
