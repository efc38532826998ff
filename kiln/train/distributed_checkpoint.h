// Checkpoints saved by every rank of a run together: each dp_shard rank of
// the first replica (and tp rank 0) writes its shards, into one temporary
// directory that rank 0 made and then publishes with the manifest
// (checkpoint.h). One process alone is the plain save.
#pragma once
#include <string>

#include "kiln/dist/mesh.h"
#include "kiln/train/checkpoint.h"

namespace kiln::train {

// Collective over the mesh's world: every rank calls it with its part of
// `data` (shard_index/shard_count set from the mesh's dp_shard dimension).
// Returns the checkpoint's path on rank 0, "" elsewhere; every rank returns
// once the step is published.
std::string save_checkpoint(CheckpointManager& manager, const CheckpointData& data,
                            const dist::DeviceMesh& mesh);

}  // namespace kiln::train
