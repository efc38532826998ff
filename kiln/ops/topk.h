// The k largest entries along an axis, for MoE routing (and, with k the full
// axis, a stable sort).
#pragma once
#include <utility>

#include "kiln/runtime/tensor.h"

namespace kiln {

// torch.topk(x, k, dim=axis, largest=True, sorted=True): the values and i64
// indices of the k largest entries of each line along `axis`, largest first.
// Ties go to the lower index and NaN counts as the largest value, so the
// order is fully determined (topk(-x, n) is a stable ascending argsort).
// Differentiable in the values (the gradient scatters back to the chosen
// positions); numeric dtypes, not bool.
std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t axis = -1);

}  // namespace kiln
