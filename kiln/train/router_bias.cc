#include "kiln/train/router_bias.h"

#include "kiln/base/error.h"
#include "kiln/ops/elementwise.h"

namespace kiln::train {

RouterBiasBalancer::RouterBiasBalancer(const std::vector<std::string>& names, double rate)
    : rate_(rate) {
  if (rate <= 0) return;
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i].ends_with(".mlp.gate.e_score_correction_bias")) biases_.push_back(i);
}

void RouterBiasBalancer::exclude_from_optimizer(optim::ParamGroups& groups) const {
  if (!enabled()) return;
  const int untrained = int(groups.groups.size());
  groups.groups.push_back({0.0, 0.0});
  for (size_t i : biases_) groups.group.at(i) = untrained;
}

void RouterBiasBalancer::update(std::vector<Tensor>& masters,
                                const std::vector<std::vector<int64_t>>& tokens,
                                const ParamDistribution& dist) const {
  if (!enabled()) return;
  KILN_CHECK(tokens.size() == biases_.size(), "router bias balancing: token counts of ",
             tokens.size(), " MoE layers for ", biases_.size(), " routing biases");
  for (size_t l = 0; l < biases_.size(); ++l) {
    const std::vector<int64_t>& load = tokens[l];
    double mean = 0;
    for (int64_t n : load) mean += double(n) / double(load.size());
    std::vector<float> step;
    for (int64_t n : load)
      step.push_back(float(double(n) < mean ? rate_ : double(n) > mean ? -rate_ : 0.0));
    Tensor& b = masters[biases_[l]];
    b = b + dist.shard_of(biases_[l], from_vector(step, {int64_t(step.size())}, b.device()));
  }
}

}  // namespace kiln::train
