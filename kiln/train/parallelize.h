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
// With tensor parallelism (tensor_parallel.h) and expert parallelism
// (expert_parallel.h) the tensors here are this rank's tp slices and
// experts; the tp plan adds its gradient reduction and its share of the
// gradient norm. Expert weights are sharded over the mesh's "efsdp" axis
// (the dp_shard ranks holding the same experts) rather than all of
// dp_shard; ep x efsdp is dp_shard, so the shards of every parameter still
// partition over dp_shard, which is what the gradient norm sums over.
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
#include "kiln/train/expert_parallel.h"
#include "kiln/train/tensor_parallel.h"

namespace kiln::train {

// Rows per FSDP shard of a dim 0 of `rows` over `n` ranks (the last ones padded).
int64_t shard_rows(int64_t rows, int64_t n);

class ParamDistribution {
 public:
  ParamDistribution() = default;  // one process
  // Parameters of `full_shapes` (the model's, each of rank >= 1) on `mesh`,
  // sliced by the tp and ep plans, then sharded over the dp dimensions.
  ParamDistribution(std::shared_ptr<dist::DeviceMesh> mesh, const std::vector<Shape>& full_shapes,
                    TensorParallelPlan tp = {}, ExpertParallelPlan ep = {});

  int64_t dp_degree() const { return dp_.size; }  // ranks a global batch is split over
  bool sharded() const { return shard_.size > 1; }
  // Nothing is split or replicated: every function below is what one process computes.
  bool local() const { return dp_.size == 1 && !tp_.enabled(); }
  // One line for the run's header: "dp_replicate 1 x dp_shard 2 (SimpleFSDP)".
  std::string describe() const;

  // This rank's masters of the model's full tensors: tp slices, experts,
  // then dp_shard rows (host side; no communication).
  std::vector<Tensor> from_full(const std::vector<Tensor>& full) const;
  // The model's full tensors from every rank's masters (collective: every
  // rank calls it).
  std::vector<Tensor> to_full(const std::vector<Tensor>& masters) const;
  // This rank's FSDP rows of parameter i's tensor `local` (its tp slice or
  // experts: what every rank of the dp group holds whole).
  Tensor shard_of(size_t i, const Tensor& local) const;

  // In the step function (traceable):
  // the model's parameters from the masters (shards): all_gather in the
  // policy's param dtype, unpad.
  std::vector<Tensor> compute_params(const std::vector<Tensor>& masters,
                                     const optim::MixedPrecisionPolicy& policy) const;
  // The step's gradients (from the backward, accumulated): the global-batch mean.
  std::vector<Tensor> reduce_grads(const std::vector<Tensor>& grads) const;
  // clip_grad_norm over the gradients of every shard (dropping those moved in).
  optim::ClipResult clip(std::vector<Tensor> grads, double max_norm) const;
  // A rank's loss -> the mean over the dp ranks.
  Tensor mean_loss(const Tensor& loss) const;
  // A rank's count (of its batch) -> the sum over the dp ranks.
  Tensor sum_over_dp(const Tensor& count) const;

 private:
  // The dp_shard rows of tp- and ep-local tensors, and back (collective).
  std::vector<Tensor> shard(const std::vector<Tensor>& local) const;
  std::vector<Tensor> unshard(const std::vector<Tensor>& shards) const;
  // The local tensors, gathered in `dtype` (default: the shards').
  std::vector<Tensor> gather(const std::vector<Tensor>& shards,
                             std::optional<DType> dtype = std::nullopt) const;
  // The FSDP axis of parameter i and this rank's index along it.
  const MeshAxis& axis_of(size_t i) const { return ep_.is_expert(i) ? efsdp_ : shard_; }
  int64_t rank_along(size_t i) const { return ep_.is_expert(i) ? efsdp_rank_ : shard_rank_; }

  std::shared_ptr<dist::DeviceMesh> mesh_;
  MeshAxis shard_{"dp_shard", 1}, efsdp_{"efsdp", 1}, replicate_{"dp_replicate", 1}, dp_{"dp", 1};
  int64_t shard_rank_ = 0, efsdp_rank_ = 0;
  std::vector<Shape> local_shapes_;  // tp slices and experts of the model's
  TensorParallelPlan tp_;
  ExpertParallelPlan ep_;
};

}  // namespace kiln::train
