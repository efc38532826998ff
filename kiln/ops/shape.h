// Ops that assemble or cut tensors along an axis: concat, stack, split and pad.
#pragma once
#include <utility>
#include <vector>

#include "kiln/runtime/tensor.h"

namespace kiln {

// Joins `tensors` (same dtype and rank, equal sizes except on `axis`) along `axis`.
Tensor concat(const std::vector<Tensor>& tensors, int64_t axis = 0);
// Joins `tensors` (one shape and dtype) along a new leading dim: [n, ...].
// concat + reshape, so two nodes however many tensors, and a vjp of one split.
Tensor stack(const std::vector<Tensor>& tensors);

// Cuts `x` along `axis` into pieces of the given sizes, which must add up to
// x.dim(axis). One op with one output per piece.
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t axis = 0);

// Pads `x` with `value`: pads[d] = {before, after} elements for dimension d,
// one pair per dimension starting at dimension 0 (numpy.pad's order).
Tensor pad(const Tensor& x, const std::vector<std::pair<int64_t, int64_t>>& pads,
           double value = 0);

}  // namespace kiln
