// Data parallelism for the training step on a device mesh: DDP, SimpleFSDP
// and HSDP are one ParamDistribution, which the step function asks for its
// parameters, gradients, gradient norm and loss. The model never changes.
//
// SimpleFSDP: masters and AdamW state are sharded along dim 0 over the
// mesh's dp_shard dimension. Dim 0 is padded with zero rows to a multiple
// of the degree n, and rank r holds rows [r k, (r + 1) k) (k = padded / n).
// In the step function each shard is all_gather'ed in the compute dtype (an
// IR op that casts, so a node of the graph trainer's program), then the
// padding is sliced off; the all_gather's vjp is the reduce_scatter, in the
// masters' dtype (f32), that brings the gradient back sharded and summed
// over dp_shard. Padding rows get zero gradients and stay zero under AdamW.
//
// Replicas (dp_replicate: HSDP, or DDP when dp_shard is 1) hold equal
// shards; their gradients are summed by one all_reduce per step. Each rank's
// loss is a mean over its local tokens, so the summed gradient is divided by
// the dp degree: the gradient of the mean over the global batch. The loss
// reported is the mean of the ranks' losses, and the gradient norm covers
// every shard.
//
// With tensor parallelism (tensor_parallel.h) the full shapes and the
// tensors here are this rank's tp slices; the plan adds its gradient
// reduction and its share of the gradient norm.
//
// Without a mesh, or with dp and tp degrees of 1, every function computes
// what one process computes, op for op.
#pragma once
#include <memory>
#include <optional>
#include <vector>

#include "kiln/dist/mesh.h"
#include "kiln/ops/collectives.h"
#include "kiln/optim/clip.h"
#include "kiln/optim/mixed_precision.h"
#include "kiln/train/tensor_parallel.h"

namespace kiln::train {

class ParamDistribution {
 public:
  ParamDistribution() = default;  // one process
  // Parameters of `full_shapes` (each of rank >= 1) on `mesh`'s dp dimensions.
  ParamDistribution(std::shared_ptr<dist::DeviceMesh> mesh, std::vector<Shape> full_shapes,
                    TensorParallelPlan tp = {});

  int64_t dp_degree() const { return dp_.size; }  // ranks a global batch is split over
  bool sharded() const { return shard_.size > 1; }
  // Nothing is split or replicated: every function below is what one process computes.
  bool local() const { return dp_.size == 1 && !tp_.enabled(); }
  // One line for the run's header: "dp_replicate 1 x dp_shard 2 (SimpleFSDP)".
  std::string describe() const;

  // This rank's shards of the full tensors (host side; no communication).
  std::vector<Tensor> shard(const std::vector<Tensor>& full) const;
  // The full tensors from every rank's shards (collective: every rank calls it).
  std::vector<Tensor> unshard(const std::vector<Tensor>& shards) const;

  // In the step function (traceable):
  // the model's parameters from the masters (shards): all_gather in the
  // policy's param dtype, unpad.
  std::vector<Tensor> compute_params(const std::vector<Tensor>& masters,
                                     const optim::MixedPrecisionPolicy& policy) const;
  // The step's gradients (from the backward, accumulated): the global-batch mean.
  std::vector<Tensor> reduce_grads(const std::vector<Tensor>& grads) const;
  // clip_grad_norm over the gradients of every shard.
  optim::ClipResult clip(const std::vector<Tensor>& grads, double max_norm) const;
  // A rank's loss -> the mean over the dp ranks.
  Tensor mean_loss(const Tensor& loss) const;

 private:
  // The full tensors, gathered in `dtype` (default: the shards').
  std::vector<Tensor> gather(const std::vector<Tensor>& shards,
                             std::optional<DType> dtype = std::nullopt) const;

  std::shared_ptr<dist::DeviceMesh> mesh_;
  MeshAxis shard_{"dp_shard", 1}, replicate_{"dp_replicate", 1}, dp_{"dp", 1};
  int64_t shard_rank_ = 0;
  std::vector<Shape> full_shapes_;
  TensorParallelPlan tp_;
};

}  // namespace kiln::train
