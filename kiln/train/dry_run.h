// `kiln train --dry-run`: the run a config asks for, planned without running
// it. The config is validated as a real run validates it (check_supported,
// the mesh's degrees, the global batch, tensor parallelism's divisibility),
// the mesh is laid out for `world_size` ranks without MPI, and the model,
// its shards, AdamW's state and the step are set up by the trainer's own
// code (run_setup.h), as placeholders of a recording that never runs: no
// weight is allocated, so it is instant for a 70B model. The memory is the
// estimate the trainer prints before its first step (step.h), for rank 0
// (every rank holds equal shards). The data and the tokenizer are not read.
#pragma once
#include <string>
#include <vector>

#include "kiln/base/shape.h"
#include "kiln/models/config.h"
#include "kiln/train/config.h"
#include "kiln/train/step.h"

namespace kiln::train {

// The ranks the parallelism degrees ask for: their product, a
// data_parallel_shard_degree of -1 counting as the expert degree (the
// fewest ranks it takes: expert parallelism borrows dp_shard's ranks).
int implied_world_size(const TrainConfig& config);

struct ParamPlan {
  std::string name;
  Shape full;   // the model's
  Shape local;  // rank 0's master shard: its tp slice or experts, then its FSDP rows (padded)
  bool trained = true;  // false: frozen (LoRA's base weights)
};

struct DryRun {
  int world_size = 1;
  bool world_size_implied = true;  // not given: implied_world_size()
  std::string mesh;                // "dp_replicate 1 x dp_shard 8 (SimpleFSDP)"
  ModelConfig model;
  std::vector<ParamPlan> params;  // named_parameters() order
  int64_t param_count = 0;        // elements of the full parameters
  int64_t trained_count = 0;      // of them, trained (all but LoRA's frozen base)
  double flops_per_token = 0;     // training, at training.seq_len (LoRA's with LoRA)
  int64_t microbatches = 1;
  std::string rung;       // "eager", "per-block compile", "graph trainer"
  MemoryEstimate memory;  // rank 0's
  // Host memory rank 0 holds for the run with checkpoint.async_mode =
  // async (its checkpoint shards' copy: RunSetup::checkpoint_shard_bytes);
  // 0 otherwise.
  int64_t checkpoint_copy = 0;
};

// `world_size` 0: implied_world_size(config). kiln::Error for whatever a
// real run of that many ranks would refuse, with its message.
DryRun dry_run(const TrainConfig& config, int world_size = 0);

}  // namespace kiln::train
