// The model side of a training run, set up from its config on its device
// mesh: the model the steps run, its parameters (names, full shapes, this
// rank's f32 master shards), the tensor- and expert-parallel plans, the
// data-parallel distribution, AdamW with its state, and the training step. A real run
// and a plan of one (`kiln train --dry-run`, dry_run.h) set it up with the
// same code, so the plan sees the shards, groups and step the run would.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "kiln/dist/mesh.h"
#include "kiln/models/transformer.h"
#include "kiln/optim/adamw.h"
#include "kiln/optim/mixed_precision.h"
#include "kiln/train/config.h"
#include "kiln/train/expert_parallel.h"
#include "kiln/train/parallelize.h"
#include "kiln/train/router_bias.h"
#include "kiln/train/step.h"
#include "kiln/train/tensor_parallel.h"

namespace kiln::train {

class RunSetup {
 public:
  // What the config and the mesh decide before anything is built (the
  // model config, the precision policy, the microbatches per step); a
  // global batch that does not split over the mesh's dp ranks is an error.
  // The model is drawn (or loaded) on the host, so every device starts from
  // the same bits, and its parameters, masters and optimizer state are then
  // placed on `device`.
  RunSetup(const TrainConfig& config, std::shared_ptr<dist::DeviceMesh> mesh, Device device);
  RunSetup(const RunSetup&) = delete;
  RunSetup& operator=(const RunSetup&) = delete;

  // Builds the model (from the seed, then checkpoint.initial_load_path's
  // weights when `load_initial_weights`), shards it and sets up AdamW and
  // the step.
  void build(bool load_initial_weights = true);

  const TrainConfig& config;
  const std::shared_ptr<dist::DeviceMesh> mesh;
  const Device device;
  const ModelConfig mc;
  const optim::MixedPrecisionPolicy policy;
  const int64_t accum;  // microbatches per optimizer step

  std::unique_ptr<CausalLM> model;
  // The trained parameters (with LoRA, lora.rank > 0: the adapters only).
  std::vector<std::string> names;
  std::vector<Shape> shapes;    // the full parameters'
  std::vector<Tensor> masters;  // this rank's shards (full without SimpleFSDP, TP or EP)
  // With LoRA, the frozen base weights; null without.
  std::shared_ptr<const FrozenParams> frozen;
  TensorParallelPlan tp;
  ExpertParallelPlan ep;
  std::shared_ptr<const ParamDistribution> dist;
  std::unique_ptr<optim::AdamW> adamw;
  optim::AdamWState state;
  std::unique_ptr<TrainStep> step;
  std::unique_ptr<RouterBiasBalancer> router_bias;  // moves the routing biases after each step

  // Every parameter of the model, in its order: the masters (this rank's
  // shards) with the frozen parameters' shards...
  std::vector<Tensor> model_masters() const;
  // ...and the model's parameters in the compute dtype (collective under a mesh).
  std::vector<Tensor> compute_params() const;
  // Elements over every parameter, and over the trained ones.
  int64_t num_parameters() const { return model->num_parameters(); }
  int64_t num_trained_parameters() const;
  // Bytes of this rank's share of a checkpoint (the masters, AdamW's m and
  // v; dim 0 split over dp_shard, padded), which a writer's background save
  // copies to host memory (checkpoint.async_mode = async).
  int64_t checkpoint_shard_bytes() const;
  // The step's expected peak memory for `batches` in the config's eager
  // mode (TrainStep::expected_memory).
  MemoryEstimate expected_memory(const std::vector<data::Batch>& batches) const;
  // Training FLOPs per token at training.seq_len: flops_per_token, or with
  // LoRA lora_flops_per_token (the frozen weights get no weight gradient).
  double flops_per_token() const;
};

}  // namespace kiln::train
