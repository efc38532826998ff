// The training step on every rung of the execution ladder. One function of
// tensors does the whole step:
//   per microbatch: forward + loss, backward (value_and_grad over the f32
//   masters, cast to the compute dtype by the mixed-precision policy)
//   -> mean of the microbatch gradients -> clip by global norm -> AdamW,
// and each rung runs that same function, which is why their losses agree
// bit for bit:
//   eager           op by op in the thread's eager mode (strict, debug or
//                   defer_and_fuse);
//   per-block       the same, but each transformer block's forward and
//                   backward run as compiled programs (compile.enable);
//   graph trainer   the whole function traced and compiled into one program
//                   whose parameters and optimizer state are donated, so the
//                   update happens in place (compile.graph_trainer).
// On a device mesh the masters and optimizer state are this rank's shards
// and a ParamDistribution (parallelize.h) adds the collectives: parameter
// all_gathers and gradient reduce_scatters inside the differentiated
// function, the replicas' all_reduce, the global norm and the mean loss.
#pragma once
#include <memory>
#include <optional>
#include <vector>

#include "kiln/data/loader.h"
#include "kiln/models/transformer.h"
#include "kiln/optim/adamw.h"
#include "kiln/optim/mixed_precision.h"
#include "kiln/runtime/compile.h"
#include "kiln/runtime/context.h"
#include "kiln/train/frozen_params.h"
#include "kiln/train/layer_stacking.h"
#include "kiln/train/parallelize.h"

namespace kiln::train {

enum class Rung { eager, per_block_compile, graph_trainer };

struct StepOptions {
  Rung rung = Rung::eager;
  int64_t microbatches = 1;     // gradient accumulation steps
  bool document_mask = false;   // batches carry doc_ids and positions
  double max_norm = 1.0;        // <= 0: no clipping (the norm is still computed)
  // Which activations the backward recomputes (activation_checkpoint.mode).
  compiler::RematPolicy remat = compiler::RematPolicy::none;
  // The decoder stack as one scan (compile.scan_layers). On one process the
  // step then keeps the layers' masters, gradients and moments stacked
  // (layer_stacking.h), so the whole step's size does not grow with depth.
  bool scan_layers = false;
  bool overlap_collectives = true;  // the graph trainer's (compile.overlap_collectives)
  // The graph trainer's step split at the layers (compile.graph_split):
  // layers per forward and backward program, 0 for all; nullopt: one program.
  std::optional<int64_t> graph_split;
  // The graph trainer's program compiles in the background (compile.background).
  bool background_compile = false;
  // The compiled programs' runs are replayed (compile.replay).
  bool replay = false;
  // Data parallelism over a mesh; null: one process.
  std::shared_ptr<const ParamDistribution> distribution;
  // Parameters that do not train (LoRA's base weights), read by every step;
  // null: every parameter trains. The masters, the optimizer and
  // `distribution` then cover the trained parameters only, and the layers
  // are not kept stacked (scan_layers stacks them in the step instead).
  std::shared_ptr<const FrozenParams> frozen;
};

// What a step is expected to hold at its peak, from a trace of the step
// (nothing runs) and the memory plan of what it computes: the graph
// trainer's optimized program, or for the eager rungs the op-by-op graph.
// Bytes of this rank; the trainer prints it before the first step and
// `kiln train --dry-run` (dry_run.h) as a table.
struct MemoryEstimate {
  // The step's arguments, held across steps:
  int64_t params = 0;           // the masters and frozen parameters (this rank's shards)
  int64_t optimizer_state = 0;  // AdamW's m and v
  int64_t batch = 0;            // the microbatches and the step's scalars
  // The memory plan's peak of what the step computes: activations,
  // compute-dtype parameter copies, gradients, updates, temporaries and
  // the kernels' scratch (Kernel::scratch_bytes).
  int64_t computed = 0;
  // Two parts of `computed`, not necessarily live at the same time:
  int64_t gradients = 0;    // one per master (not frozen), of its type; all live before clipping
  // Kept on the device for the backward, per microbatch (remat.h); nullopt
  // under compile.scan_layers, whose blocks are a scan's body.
  std::optional<int64_t> activations;
  // Held in the offload pool (host memory, not part of total()) at its
  // peak: the activations activation_checkpoint.mode = offload moves out.
  int64_t offloaded = 0;
  // Under compile.replay, the buffers the recordings of per-block compile's
  // programs, or of the graph trainer's segments (a graph split, skinny
  // collectives), keep from their first replay on (replay_buffer_bytes).
  int64_t recordings = 0;
  int64_t inputs() const { return params + optimizer_state + batch; }
  int64_t total() const { return inputs() + computed + recordings; }
};

struct StepResult {
  double loss = 0;       // mean of the microbatch losses (and of the dp ranks)
  double grad_norm = 0;  // before clipping, over every shard
  // MoE models, over every microbatch and dp rank: [layer][expert] tokens
  // routed, and the assignments the token dispatchers dropped.
  std::vector<std::vector<int64_t>> expert_tokens;
  int64_t dropped_tokens = 0;
  // Chat data: the training targets (assistant tokens) over every rank, as
  // the trainer counts them.
  std::optional<int64_t> targets;
};

class TrainStep {
 public:
  // `model` is run with the masters (cast by `policy`) as its parameters.
  TrainStep(CausalLM& model, optim::MixedPrecisionPolicy policy, const optim::AdamW& adamw,
            StepOptions options);

  // One optimizer step over `batches` (options.microbatches of them) at
  // learning rate `lr`; replaces `masters` and `state` with their updates.
  StepResult run(std::vector<Tensor>& masters, optim::AdamWState& state,
                 const std::vector<data::Batch>& batches, double lr);

  // The step's peak memory when its ops outside compiled programs run in
  // eager mode `mode` (defer_and_fuse: in its regions, defer_regions.h).
  MemoryEstimate expected_memory(const std::vector<Tensor>& masters,
                                 const optim::AdamWState& state,
                                 const std::vector<data::Batch>& batches, EagerMode mode) const;
  // The step function traced on these arguments (nothing runs): what every
  // rung runs, for the SPMD handshake.
  ir::Graph graph(const std::vector<Tensor>& masters, const optim::AdamWState& state,
                  const std::vector<data::Batch>& batches) const;

  // The graph trainer's program (after a first run), for inspection.
  const Executable* program() const;

 private:
  std::vector<Tensor> step_function(std::vector<Tensor> args) const;
  // The step function's arguments are per_param_args with the masters, m
  // and v in the step's layout (stacked under scan_layers on one process).
  std::vector<Tensor> per_param_args(const std::vector<Tensor>& masters,
                                     const optim::AdamWState& state,
                                     const std::vector<data::Batch>& batches, double lr) const;
  template <class T>
  std::vector<T> to_step_layout(std::vector<T> per_param) const;
  std::vector<Tensor> stack_list(std::vector<Tensor> per_param) const;
  std::vector<ir::TypeInfo> stack_list(std::vector<ir::TypeInfo> per_param) const;
  std::vector<ir::TypeInfo> step_arg_types(const std::vector<Tensor>& masters,
                                           const optim::AdamWState& state,
                                           const std::vector<data::Batch>& batches) const;
  // The optimizer of the step's layout (per parameter, or stacked).
  const optim::AdamW& step_adamw() const { return stacked_adamw_ ? *stacked_adamw_ : adamw_; }

  CausalLM& model_;
  optim::MixedPrecisionPolicy policy_;
  const optim::AdamW& adamw_;
  StepOptions options_;
  std::shared_ptr<const ParamDistribution> dist_;  // never null
  std::shared_ptr<const FrozenParams> frozen_;     // null: every parameter trains
  std::optional<LayerStacking> stacking_;         // scan_layers on one process
  std::optional<optim::AdamW> stacked_adamw_;     // adamw_ over the stacked layout
  std::optional<CompiledFunction> compiled_;
};

}  // namespace kiln::train
