// A checkpoint step's manifest.json (checkpoint.h): its step, the JSON
// states of the run, and the size and xxh64 of every file it publishes.
//   {"format": "kiln-checkpoint", "version": 1, "step": N,
//    "files": {"<name>.safetensors": {"bytes": B, "xxh64": "<16 hex>"}, ...},
//    "optimizer": {...}, "scheduler": {...}, "loader": {...}, "rng": {...},
//    "config": {...},
//    "shards": {"count": n, "rows": {"<tensor>": full rows, ...}}}  (n > 1 only)
// Parsing checks every field's type and range before any is used, so a
// damaged or hostile manifest is a kiln::Error naming it and the field.
#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace kiln::train {

// The safetensors files a step has: "model" and "optimizer" each, one file
// or one a shard.
inline constexpr const char* kCheckpointStems[] = {"model", "optimizer"};
inline constexpr int64_t kMaxCheckpointShards = 1 << 16;

// "model.safetensors" alone; shard i of n > 1: "model-0000<i+1>-of-0000<n>.safetensors".
std::string checkpoint_shard_file(const char* stem, int64_t i, int64_t n);

struct ManifestFile {
  uint64_t bytes = 0;
  uint64_t xxh64 = 0;
};

struct CheckpointManifest {
  int64_t step = 0;
  int64_t shard_count = 1;
  std::map<std::string, int64_t> full_rows;  // sharded: every tensor's unpadded dim 0
  std::map<std::string, ManifestFile> files;  // every file of every stem and shard
  // The run's states: objects (empty when the manifest has none).
  nlohmann::json optimizer = nlohmann::json::object(), scheduler = nlohmann::json::object(),
                 loader = nlohmann::json::object(), rng = nlohmann::json::object(),
                 config = nlohmann::json::object();
};

std::string checkpoint_manifest_text(const CheckpointManifest& manifest);
// `path` names the manifest in errors.
CheckpointManifest parse_checkpoint_manifest(std::string_view text, const std::string& path);

// 16 lower-case hex digits.
std::string xxh64_hex(uint64_t v);

}  // namespace kiln::train
