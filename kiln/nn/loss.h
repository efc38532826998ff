// The language-model loss as a component: the LM head and the
// cross-entropy over its logits together, so an implementation may avoid
// materialising the [N, vocab] logits.
#pragma once
#include <cstdint>

#include "kiln/nn/component_registry.h"
#include "kiln/runtime/tensor.h"

namespace kiln::nn {

// h [N, D] hidden states, w [V, D] the LM-head weight, targets [N] i32/i64
// -> the mean cross-entropy of h @ w^T over targets != ignore_index (f32;
// f64 for f64). Implementations: kiln/nn/components/loss_*.cc.
using LossFn = std::function<Tensor(const Tensor& h, const Tensor& w, const Tensor& targets,
                                    int64_t ignore_index)>;
ComponentRegistry<LossFn>& loss_impls();

}  // namespace kiln::nn
