// Checkpoints saved by every rank of a run together: each dp_shard rank of
// the first replica (and tp rank 0) writes its shards, into one temporary
// directory that rank 0 made and then publishes with the manifest
// (checkpoint.h). One process alone is the plain save.
#pragma once
#include <string>

#include "kiln/dist/mesh.h"
#include "kiln/train/checkpoint.h"

namespace kiln::train {

// Whether this rank writes shards of the mesh's checkpoints: the first
// replica's (dp_replicate 0) rank 0 of each tp group; the others hold copies.
bool writes_checkpoint_shards(const dist::DeviceMesh& mesh);

// Collective over `world`, the mesh's world or a group of the same ranks
// (one of its own lets a save on another thread run beside the training's
// collectives): every rank calls it with its part of `data`
// (shard_index/shard_count set from the mesh's dp_shard dimension).
// Returns the checkpoint's path on rank 0, "" elsewhere; every rank returns
// once the step is published.
std::string save_checkpoint(CheckpointManager& manager, const CheckpointData& data,
                            const dist::DeviceMesh& mesh, dist::ProcessGroup& world);

}  // namespace kiln::train
