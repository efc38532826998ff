// The reduction engine's axis planning (reduction_engine.h).
#include "kiln/backend/cpu/reduction_engine.h"

namespace kiln::cpu {

namespace {

// Appends an axis to one group, merging it into the group's last axis when
// stepping through both row-major is one stride.
void append_axis(Shape& shape, Strides& strides, int64_t size, int64_t stride) {
  if (!shape.empty() && strides.back() == stride * size) {
    int64_t n = shape.back() * size;
    shape.erase(shape.size() - 1);
    strides.erase(strides.size() - 1);
    shape.push_back(n);
    strides.push_back(stride);
    return;
  }
  shape.push_back(size);
  strides.push_back(stride);
}

}  // namespace

ReducePlan make_plan(const TensorRef& in, const std::vector<bool>& reduced) {
  ReducePlan p;
  for (int d = 0; d < in.rank(); ++d) {
    if (in.shape[d] == 1) continue;
    if (reduced[d]) append_axis(p.reduced, p.reduced_strides, in.shape[d], in.strides[d]);
    else append_axis(p.kept, p.kept_strides, in.shape[d], in.strides[d]);
  }
  return p;
}

}  // namespace kiln::cpu
