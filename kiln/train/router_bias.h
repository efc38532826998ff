// Auxiliary-loss-free load balancing (DeepSeek-V3; TorchTitan's expert
// bias update), for models with model.router_bias_update_rate > 0: after
// each step every MoE layer's routing bias moves towards balance,
//   b_e += rate * sign(mean load - load_e),
// from the step's tokens per expert over every rank and microbatch, which
// every rank holds alike, so replicas stay equal. The optimizer leaves
// these biases (exclude_from_optimizer: a parameter group of lr_scale 0);
// checkpoints keep them as the model parameters they are.
#pragma once
#include <string>
#include <vector>

#include "kiln/optim/adamw.h"
#include "kiln/train/parallelize.h"

namespace kiln::train {

class RouterBiasBalancer {
 public:
  // The biases among `names` (a CausalLM's parameters), MoE layers in order.
  RouterBiasBalancer(const std::vector<std::string>& names, double rate);

  bool enabled() const { return !biases_.empty(); }
  // Moves the biases into a parameter group of their own with lr_scale 0
  // and no decay, which AdamW leaves unchanged (no gradient trains them).
  void exclude_from_optimizer(optim::ParamGroups& groups) const;
  // Moves this rank's bias shards in `masters` by one step's `tokens`
  // ([MoE layer][expert], every rank's).
  void update(std::vector<Tensor>& masters, const std::vector<std::vector<int64_t>>& tokens,
              const ParamDistribution& dist) const;

 private:
  double rate_;
  std::vector<size_t> biases_;  // parameter indices, layer by layer
};

}  // namespace kiln::train
