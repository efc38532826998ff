// Auxiliary-loss-free load balancing (DeepSeek-V3; TorchTitan's expert
// bias update), for models with model.router_bias_update_rate > 0: after
// each step every MoE layer's routing bias moves towards balance,
//   b_e += rate * sign(mean load - load_e),
// from the step's tokens per expert over every rank and microbatch, which
// every rank holds alike, so replicas stay equal. The optimizer leaves
// these biases (their parameter group's lr_scale is 0); checkpoints keep
// them as the model parameters they are.
#pragma once
#include <string>
#include <vector>

#include "kiln/train/parallelize.h"

namespace kiln::train {

class RouterBiasBalancer {
 public:
  // The biases among `names` (a CausalLM's parameters), MoE layers in order.
  RouterBiasBalancer(const std::vector<std::string>& names, double rate);

  bool enabled() const { return !biases_.empty(); }
  // Moves this rank's bias shards in `masters` by one step's `tokens`
  // ([MoE layer][expert], every rank's).
  void update(std::vector<Tensor>& masters, const std::vector<std::vector<int64_t>>& tokens,
              const ParamDistribution& dist) const;

 private:
  double rate_;
  std::vector<size_t> biases_;  // parameter indices, layer by layer
};

}  // namespace kiln::train
