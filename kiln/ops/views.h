// View ops (reshape, permute, slice, expand, squeeze, unsqueeze) are reached
// through Tensor's methods; here are the ops around them.
#pragma once
#include "kiln/runtime/tensor.h"

namespace kiln {

// `base` with the slice [start:stop:step] of `axis` replaced by `src`.
Tensor slice_scatter(const Tensor& base, const Tensor& src, int64_t axis, int64_t start,
                     int64_t stop, int64_t step = 1);

// The identity that compiler passes do not look through (see views.cc).
Tensor optimization_barrier(const Tensor& x);

}  // namespace kiln
