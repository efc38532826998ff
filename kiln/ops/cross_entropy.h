// The cross_entropy op: one IR op whose composite is built from the basic
// ops; autograd differentiates the composite. The fused, tiled variant that
// also does the LM-head matmul is linear_cross_entropy (fused_kernels.h).
#pragma once
#include "kiln/runtime/tensor.h"

namespace kiln {

enum class Reduction { mean, sum, none };

// Softmax cross-entropy of logits [..., V] against integer (i32/i64) class
// targets of shape [...], as torch.nn.functional.cross_entropy: targets
// equal to ignore_index contribute 0 and are left out of the mean (a mean
// over no targets is NaN, as in torch). The loss is f32 (f64 for f64
// logits) whatever the logits' dtype; torch rounds it to the logits' dtype.
// none: the per-target losses; mean, sum: a scalar.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100,
                     Reduction reduction = Reduction::mean);

}  // namespace kiln
