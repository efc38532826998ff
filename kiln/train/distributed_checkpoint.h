// Checkpoints saved by every rank of a run together: each dp_shard rank of
// the first replica (and tp rank 0) writes its shards, into one temporary
// directory that rank 0 made and then publishes with the manifest
// (checkpoint.h). One process alone is the plain save.
#pragma once
#include <chrono>
#include <memory>
#include <optional>
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

// The step every rank of `group` resumes from (collective): `mine` is this
// rank's answer from its view of `folder` (resume_step's). Ranks that see
// different checkpoints (a dump folder on each host's own disk, a shared
// file system that has not caught up) would resume different models and
// train them in lockstep, so that is an error on every rank naming what
// each saw.
std::optional<int64_t> agree_on_resume_step(dist::ProcessGroup& group, std::optional<int64_t> mine,
                                            const std::string& folder);

// `step` read on every rank of `group` (collective): a rank that cannot read
// it fails every rank at once, naming it and why: the others would otherwise
// wait for it until the group's timeout, unless its process ended the job.
LoadedCheckpoint load_checkpoint_together(const CheckpointManager& manager, int64_t step,
                                          dist::ProcessGroup& group);

// Collective over `world`, the mesh's world or a group of the same ranks
// (checkpoint_group's): every rank calls it with its part of `data`
// (shard_index/shard_count set from the mesh's dp_shard dimension).
// Returns the checkpoint's path on rank 0, "" elsewhere; every rank returns
// once the step is published. A rank whose part fails (its disk is full)
// fails every rank at once, naming it and why.
std::string save_checkpoint(CheckpointManager& manager, const CheckpointData& data,
                            const dist::DeviceMesh& mesh, dist::ProcessGroup& world);

}  // namespace kiln::train
