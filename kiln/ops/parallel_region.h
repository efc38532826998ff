// The two boundaries of a tensor-parallel region (Megatron-LM's f and g).
// Unlike the collectives of collectives.h, whose vjps are the true adjoints
// over the ranks, these treat values outside the region as replicated: every
// rank of the axis holds the same value and the same cotangent.
//   enter: identity forward; the backward sums the cotangents over the axis
//          (each rank differentiated only its part of the region).
//   leave: sums the ranks' partial outputs (all_reduce); the backward passes
//          the (replicated) cotangent through unchanged.
// Column-parallel layers enter a region, row-parallel layers leave it.
#pragma once
#include "kiln/ops/collectives.h"

namespace kiln {

Tensor enter_parallel_region(const Tensor& x, const MeshAxis& axis);
Tensor leave_parallel_region(const Tensor& x, const MeshAxis& axis);

}  // namespace kiln
