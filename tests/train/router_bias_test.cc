// Auxiliary-loss-free balancing's update (kiln/train/router_bias.h) on one
// process: each layer's bias moves by the rate towards balance, nothing
// else moves, and the optimizer's groups leave the biases alone.
#include "kiln/train/router_bias.h"

#include <gtest/gtest.h>

#include "kiln/kiln.h"
#include "kiln/optim/adamw.h"

namespace kiln::train {
namespace {

const std::vector<std::string> kNames = {
    "model.layers.0.mlp.gate.weight", "model.layers.0.mlp.gate.e_score_correction_bias",
    "model.norm.weight", "model.layers.1.mlp.gate.e_score_correction_bias"};

TEST(RouterBias, EachLayerMovesTowardsBalance) {
  std::vector<Tensor> masters = {ones({4, 3}), from_vector<float>({0, 0, 0, 1}, {4}), ones({3}),
                                 zeros({4})};
  RouterBiasBalancer balancer(kNames, 0.25);
  ASSERT_TRUE(balancer.enabled());
  // Layer 0: mean 4, so experts below it rise and the one above falls;
  // layer 1 is balanced.
  balancer.update(masters, {{1, 2, 3, 10}, {4, 4, 4, 4}}, ParamDistribution());
  EXPECT_EQ(masters[1].to_vector<float>(), (std::vector<float>{0.25, 0.25, 0.25, 0.75}));
  EXPECT_EQ(masters[3].to_vector<float>(), std::vector<float>(4, 0.0f));
  EXPECT_EQ(masters[0].to_vector<float>(), std::vector<float>(12, 1.0f));
  EXPECT_EQ(masters[2].to_vector<float>(), std::vector<float>(3, 1.0f));
  EXPECT_THROW(balancer.update(masters, {{1, 2, 3, 10}}, ParamDistribution()), Error);
  EXPECT_FALSE(RouterBiasBalancer(kNames, 0).enabled());
}

TEST(RouterBias, TheOptimizerLeavesTheBiases) {
  std::vector<Tensor> params = {ones({4, 3}), zeros({4}), ones({3}), zeros({4})};
  optim::ParamGroups g = optim::default_param_groups(kNames, params, 0.1, true);
  RouterBiasBalancer(kNames, 0.25).exclude_from_optimizer(g);
  ASSERT_EQ(g.groups.size(), 3u);
  EXPECT_EQ(g.group, (std::vector<int>{0, 2, 0, 2}));
  EXPECT_EQ(g.groups[2].lr_scale, 0.0);
  EXPECT_EQ(g.groups[2].weight_decay, 0.0);
  optim::ParamGroups off = optim::default_param_groups(kNames, params, 0.1, true);
  RouterBiasBalancer(kNames, 0).exclude_from_optimizer(off);
  EXPECT_EQ(off.groups.size(), 2u) << "balancing off: the groups are not touched";
}

}  // namespace
}  // namespace kiln::train
