// Checkpoints saved by every rank of a run together: each dp_shard rank of
// the first replica (and tp rank 0) writes its shards, into one temporary
// directory that rank 0 made and then publishes with the manifest
// (checkpoint.h). One process alone is the plain save.
#pragma once
#include <chrono>
#include <memory>
#include <string>

#include "kiln/dist/mesh.h"
#include "kiln/train/checkpoint.h"

namespace kiln::train {

// Whether this rank writes shards of the mesh's checkpoints: the first
// replica's (dp_replicate 0) rank 0 of each tp group; the others hold copies.
bool writes_checkpoint_shards(const dist::DeviceMesh& mesh);

// The ranks of `world` in a group of their own for checkpoint saves and
// resumes (collective over `world`): its collectives wait `timeout` for the
// slowest rank's writes or reads, and a save on another thread runs over it
// beside the training's collectives.
std::shared_ptr<dist::ProcessGroup> checkpoint_group(dist::ProcessGroup& world,
                                                     std::chrono::milliseconds timeout);

// Collective over `world`, the mesh's world or a group of the same ranks
// (checkpoint_group's): every rank calls it with its part of `data`
// (shard_index/shard_count set from the mesh's dp_shard dimension).
// Returns the checkpoint's path on rank 0, "" elsewhere; every rank returns
// once the step is published.
std::string save_checkpoint(CheckpointManager& manager, const CheckpointData& data,
                            const dist::DeviceMesh& mesh, dist::ProcessGroup& world);

}  // namespace kiln::train
