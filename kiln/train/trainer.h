// The training loop behind `kiln train`. From a TrainConfig it sets up
//   the tokenizer  model.tokenizer_path, else one learned from the data and
//                  kept as <dump_folder>/tokenizer.json (reused on resume),
//   the data       kiln/data load_dataset + DataLoader (packing, split),
//   the model      build_model from the resolved ModelConfig; under a
//                  bfloat16 policy the model runs on a bf16 copy of f32
//                  master weights (kiln/optim/mixed_precision.h),
//   the optimizer  AdamW with parameter groups, the LR schedule,
// then resumes from the latest complete checkpoint in the dump folder (or
// checkpoint.load_step) when checkpointing is enabled, and runs each step:
//   value_and_grad over the parameters per microbatch -> mean over
//   microbatches -> clip by global norm -> AdamW at the schedule's lr
//   (eagerly; with compile.enable each transformer block's forward and
//   backward run as compiled programs, with compile.graph_trainer the whole
//   step is one program),
// with validation, metrics and checkpoints at their intervals. SIGINT or
// SIGTERM finishes the current step, saves a checkpoint (when enabled) and
// stops the run.
//
// Started by `mpirun -n N kiln train ...`, every rank runs this function on
// the device mesh of --parallelism.* (parallelize.h: DDP, SimpleFSDP,
// HSDP): each takes its share of every global batch (training.
// local_batch_size is per rank), rank 0 alone prints and writes metrics,
// the dp_shard ranks each write their shards of a checkpoint, and a resumed
// run may use another mesh. Errors are prefixed "rank N: ".
#pragma once
#include <functional>
#include <optional>
#include <ostream>
#include <string>

#include "kiln/dist/mesh.h"
#include "kiln/train/config.h"
#include "kiln/train/metrics.h"

namespace kiln::train {

struct TrainResult {
  int64_t start_step = 0;  // the step the run resumed from (0: a fresh run)
  int64_t last_step = 0;   // the last step completed
  std::optional<double> last_loss, last_grad_norm;
  int stopped_by_signal = 0;    // SIGINT / SIGTERM when a signal stopped the run
  bool stopped_by_callback = false;  // the step callback asked to stop
  std::string last_checkpoint;  // the last checkpoint written by this run (empty: none)
};

// Called on every rank after each step with its metrics (throughput, MFU
// and memory are filled on rank 0 at logged steps only). Returning false
// stops the run as a signal does: the step's checkpoint is saved (when
// checkpointing is enabled), and every rank stops if any callback said so.
using StepCallback = std::function<bool(const StepMetrics&)>;

// Runs the training job `config` describes (finalize()d), printing progress
// to `out`. Errors (missing data, a bad checkpoint, an unsupported setting)
// are kiln::Error.
TrainResult run_training(const TrainConfig& config, std::ostream& out,
                         const StepCallback& on_step = {});

// Settings the config accepts (the recipes for clusters use them) that this
// trainer cannot honour yet: a kiln::Error naming the key, refused up front
// rather than ignored (by a run and by a dry run alike).
void check_supported(const TrainConfig& config);

// The device mesh's degrees from --parallelism.*.
dist::MeshDegrees mesh_degrees(const TrainConfig& config);

// The dump folder's tokenizer.json, where a run keeps the tokenizer it learned.
std::string dump_tokenizer_path(const TrainConfig& config);

}  // namespace kiln::train
