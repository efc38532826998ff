// Layout arithmetic every backend's kernels share (host-side, on TensorRefs
// and attributes): blocks of a strided buffer, how concat, split and pad
// move their parts, the axes a reduction op reduces, a tensor seen around
// one axis.
#pragma once
#include <vector>

#include "kiln/runtime/kernel.h"

namespace kiln {

// The block of `t` that starts at `start[d]` in each dimension and has `shape`.
TensorRef block(const TensorRef& t, const Dims& start, const Shape& shape);
// The block of `t` at [start, start + n) along `axis`.
TensorRef block_on_axis(const TensorRef& t, int axis, int64_t start, int64_t n);

// A backend's element-by-element copy between strided buffers of one dtype
// and shape.
using StridedCopyFn = void (*)(const TensorRef& dst, const TensorRef& src);

// concat and split as copies of their non-empty parts, and the block of
// pad's output that its input fills (the caller fills the rest first).
void concat_parts(const KernelArgs& a, StridedCopyFn copy);
void split_parts(const KernelArgs& a, StridedCopyFn copy);
TensorRef pad_interior(const KernelArgs& a);

// The axes a reduction op reduces: its "axes" attribute (empty: all), or its
// one "axis". Rank-0 inputs get one entry.
std::vector<bool> reduced_axes(const KernelArgs& a);

// A tensor of `shape` viewed as [outer, size, inner] around `axis`.
struct AxisSplit {
  int64_t outer = 1, size = 1, inner = 1;
};
AxisSplit split_at(const Shape& shape, int axis);

}  // namespace kiln
