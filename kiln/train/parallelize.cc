#include "kiln/train/parallelize.h"

#include "kiln/base/error.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/shape.h"

namespace kiln::train {

int64_t shard_rows(int64_t rows, int64_t n) { return (rows + n - 1) / n; }

ParamDistribution::ParamDistribution(std::shared_ptr<dist::DeviceMesh> mesh,
                                     const std::vector<Shape>& full_shapes, TensorParallelPlan tp,
                                     ExpertParallelPlan ep)
    : mesh_(std::move(mesh)), tp_(std::move(tp)), ep_(std::move(ep)) {
  KILN_CHECK(mesh_, "data parallelism: no device mesh");
  shard_.size = mesh_->size("dp_shard");
  efsdp_.size = mesh_->size("efsdp");
  replicate_.size = mesh_->size("dp_replicate");
  dp_.size = mesh_->size("dp");
  shard_rank_ = mesh_->coordinate("dp_shard");
  efsdp_rank_ = mesh_->coordinate("efsdp");
  local_shapes_ = ep_.local_shapes(tp_.local_shapes(full_shapes));
  for (const Shape& s : local_shapes_)
    KILN_CHECK(s.size() >= 1, "SimpleFSDP shards parameters along dim 0, but one is a scalar (",
               s, "); give it shape [1]");
}

std::string ParamDistribution::describe() const {
  const char* kind = sharded() && replicate_.size > 1 ? "HSDP"
                     : sharded()                      ? "SimpleFSDP"
                     : dp_.size > 1                   ? "DDP"
                                                      : "one data-parallel rank";
  return cat("dp_replicate ", replicate_.size, " x dp_shard ", shard_.size, " (", kind, ")",
             ep_.split() ? cat(", experts over ep ", ep_.degree(), " x efsdp ", efsdp_.size, " (",
                               ep_.describe(), " dispatcher)")
                         : "",
             tp_.enabled() ? cat(" x tp ", tp_.degree(), " (tensor parallel)") : "");
}

std::vector<Tensor> ParamDistribution::from_full(const std::vector<Tensor>& full) const {
  return shard(ep_.shard(tp_.shard(full)));
}

std::vector<Tensor> ParamDistribution::to_full(const std::vector<Tensor>& masters) const {
  return tp_.unshard(ep_.unshard(unshard(masters)));
}

std::vector<Tensor> ParamDistribution::shard(const std::vector<Tensor>& local) const {
  if (!sharded()) return local;
  KILN_CHECK(local.size() == local_shapes_.size(), "SimpleFSDP: ", local.size(),
             " tensors to shard, but the distribution was made for ", local_shapes_.size());
  std::vector<Tensor> out;
  for (size_t i = 0; i < local.size(); ++i) out.push_back(shard_of(i, local[i]));
  return out;
}

Tensor ParamDistribution::shard_of(size_t i, const Tensor& t) const {
  if (!sharded()) return t;
  KILN_CHECK(i < local_shapes_.size() && t.shape() == local_shapes_[i], "SimpleFSDP: tensor ", i,
             " is ", t.shape(), ", expected ",
             i < local_shapes_.size() ? local_shapes_[i] : Shape{});
  const int64_t n = axis_of(i).size, r = rank_along(i);
  int64_t rows = t.shape()[0], k = shard_rows(rows, n);
  std::vector<std::pair<int64_t, int64_t>> pads(t.shape().size(), {0, 0});
  pads[0].second = k * n - rows;
  Tensor padded = pads[0].second ? pad(t, pads) : t;
  return padded.slice(0, r * k, (r + 1) * k).contiguous();
}

std::vector<Tensor> ParamDistribution::gather(const std::vector<Tensor>& shards,
                                              std::optional<DType> dtype) const {
  std::vector<Tensor> out;
  for (size_t i = 0; i < shards.size(); ++i) {
    Tensor full = all_gather(shards[i], 0, axis_of(i), dtype.value_or(shards[i].dtype()));
    int64_t rows = local_shapes_[i][0];
    out.push_back(full.shape()[0] == rows ? full : full.slice(0, 0, rows));
  }
  return out;
}

std::vector<Tensor> ParamDistribution::unshard(const std::vector<Tensor>& shards) const {
  if (!sharded()) return shards;
  std::vector<Tensor> out = gather(shards);
  for (Tensor& t : out) t = t.contiguous();
  return out;
}

std::vector<Tensor> ParamDistribution::compute_params(
    const std::vector<Tensor>& masters, const optim::MixedPrecisionPolicy& policy) const {
  // Sharded: the all_gather casts each master shard, so it moves
  // compute-dtype (bf16) shards while its vjp reduce_scatters the gradient
  // in the masters' dtype (f32), FSDP2's param_dtype / reduce_dtype.
  return sharded() ? gather(masters, policy.param_dtype) : policy.compute_params(masters);
}

std::vector<Tensor> ParamDistribution::reduce_grads(const std::vector<Tensor>& tp_local) const {
  std::vector<Tensor> grads = tp_.reduce_grads(tp_local);
  if (dp_.size == 1) return grads;
  // Sum over replicas (dp_shard was summed by the reduce_scatters), then
  // the sum of dp local means -> the global mean (exact for powers of two).
  std::vector<Tensor> out;
  for (const Tensor& g : grads)
    out.push_back((replicate_.size > 1 ? all_reduce(g, replicate_) : g) * (1.0 / double(dp_.size)));
  return out;
}

optim::ClipResult ParamDistribution::clip(std::vector<Tensor> grads, double max_norm) const {
  if (!sharded() && !tp_.enabled()) return optim::clip_grad_norm(std::move(grads), max_norm);
  // Replicas hold equal gradients: the squares are summed over the shards
  // only (and over tp for the tp slices).
  Tensor squares = tp_.squared_norm(grads);
  if (sharded()) squares = all_reduce(squares, shard_);
  return optim::clip_to_norm(std::move(grads), sqrt(squares), max_norm);
}

Tensor ParamDistribution::mean_loss(const Tensor& loss) const {
  return dp_.size > 1 ? all_reduce(loss, dp_, ReduceOp::avg) : loss;
}

Tensor ParamDistribution::sum_over_dp(const Tensor& count) const {
  return dp_.size > 1 ? all_reduce(count, dp_) : count;
}

}  // namespace kiln::train
