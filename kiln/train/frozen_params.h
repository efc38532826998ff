// The parameters a training step reads but does not train (LoRA's base
// weights): they get no gradient and no optimizer state, and are passed to
// the step beside the trained masters. Both lists keep the model's
// named_parameters() order; `frozen` marks which parameter is which.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "kiln/train/parallelize.h"

namespace kiln::train {

struct FrozenParams {
  std::vector<bool> frozen;   // per model parameter
  // Of the frozen parameters, in order: names, full shapes, this rank's shards.
  std::vector<std::string> names;
  std::vector<Shape> shapes;
  std::vector<Tensor> shards;
  // How the frozen parameters are distributed (sharded like the masters).
  std::shared_ptr<const ParamDistribution> distribution;

  // The model's parameters, in order, from the trained ones and the frozen ones.
  std::vector<Tensor> merge(const std::vector<Tensor>& trained,
                            const std::vector<Tensor>& frozen_values) const;
};

}  // namespace kiln::train
