// Reductions over any set of axes (empty list: all axes), with keepdim.
// Sums, means and norms accumulate in f32 (f64 for f64 inputs) in a fixed
// order, so results do not depend on the thread count.
#pragma once
#include <vector>

#include "kiln/runtime/tensor.h"

namespace kiln {

Tensor sum(const Tensor& x, const std::vector<int64_t>& axes = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const std::vector<int64_t>& axes = {}, bool keepdim = false);
Tensor max(const Tensor& x, const std::vector<int64_t>& axes = {}, bool keepdim = false);
Tensor min(const Tensor& x, const std::vector<int64_t>& axes = {}, bool keepdim = false);
Tensor argmax(const Tensor& x, int64_t axis, bool keepdim = false);  // i64
Tensor logsumexp(const Tensor& x, const std::vector<int64_t>& axes = {}, bool keepdim = false);
// Variance with `correction` (0: population, 1: unbiased, as torch.var).
Tensor var(const Tensor& x, const std::vector<int64_t>& axes = {}, int64_t correction = 1,
           bool keepdim = false);
Tensor softmax(const Tensor& x, int64_t axis);
Tensor log_softmax(const Tensor& x, int64_t axis);

}  // namespace kiln
