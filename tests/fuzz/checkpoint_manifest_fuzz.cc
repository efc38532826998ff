// Checkpoint manifests (train/checkpoint_manifest.h): a manifest that
// parses lists every file of its shards and prints as one that parses to
// itself; its rng state restores or is refused.
#include "kiln/train/checkpoint.h"
#include "kiln/train/checkpoint_manifest.h"
#include "tests/fuzz/fuzz_target.h"

KILN_FUZZ_TARGET(input) {
  using namespace kiln::train;
  CheckpointManifest m = parse_checkpoint_manifest(kiln::fuzz::as_text(input), "manifest.json");
  kiln::fuzz::check(m.shard_count >= 1 && m.shard_count <= kMaxCheckpointShards, "shard count");
  kiln::fuzz::check(m.files.size() == 2 * size_t(m.shard_count), "files listed");
  const std::string text = checkpoint_manifest_text(m);
  kiln::fuzz::check(checkpoint_manifest_text(parse_checkpoint_manifest(text, "printed")) == text,
                    "a manifest printed parses to another");
  if (!m.rng.empty()) rng_from_json(m.rng);
}
