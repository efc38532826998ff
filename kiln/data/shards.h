// Pre-tokenized shards, as `kiln data prepare` writes them. One shard file:
//
//   header (48 bytes, little-endian):
//     magic "KILNTOK\0" | u32 version (1) | u32 bytes per token (2: u16, 4: u32)
//     | u64 tokens | u64 documents | u32 vocab_size | u32 reserved (0)
//     | u64 xxh64 of everything after the header
//   tokens        (tokens x u16/u32; u16 when vocab_size <= 65536)
//   zero padding to a multiple of 8 bytes
//   offsets       ((documents + 1) x u64: document i is tokens [o[i], o[i+1]))
//
// Shards hold documents without BOS/EOS: packing adds those as configured.
// A prepared folder (kiln/data/prepare.h) holds train-NNNNN.bin (and
// val-NNNNN.bin with a validation fraction) plus meta.json listing them:
//   {"format": "kiln-shards", "version": 1, "vocab_size": V,
//    "train": [files], "val": [files], "documents": {"train": n, "val": n},
//    "tokens": {"train": n, "val": n}, "tokenizer": "...",
//    "tokenizer_fingerprint": "<16 hex digits>", "val_fraction": f}
// Files are written atomically. Readers memory-map them and validate the header, sizes,
// offsets, checksum and token range, so a truncated or corrupt shard is a
// kiln::Error naming the file.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/data/corpus.h"

namespace kiln::data {

inline constexpr char kShardMagic[8] = {'K', 'I', 'L', 'N', 'T', 'O', 'K', '\0'};
inline constexpr uint32_t kShardVersion = 1;
inline constexpr uint64_t kShardHeaderBytes = 48;

// Writes documents [offsets[i], offsets[i+1]) of `tokens` to `path`.
// Every id must be in [0, vocab_size).
void write_shard(const std::string& path, const std::vector<int32_t>& tokens,
                 const std::vector<uint64_t>& offsets, int32_t vocab_size);
// Maps and validates one shard file; its documents share the mapping.
TokenCorpus read_shard(const std::string& path);
// True when `path` is a shard folder (holds meta.json) or a shard file.
bool is_shard_path(const std::string& path);

struct PreparedShards {
  TokenCorpus train, val;
  int32_t vocab_size = 0;
  // Of the tokenizer that made them (data/tokenizer_fingerprint.h), with
  // the name meta.json gives it; none for a single shard file or a folder
  // an older kiln prepared.
  std::optional<uint64_t> tokenizer_fingerprint;
  std::string tokenizer_name;
  bool has_val = false;  // the folder was prepared with a validation fraction
};
// A prepared folder (meta.json + its shards) or a single shard file (train only).
PreparedShards read_prepared(const std::string& path);

}  // namespace kiln::data
