#include "kiln/runtime/kernel_layout.h"

#include <algorithm>

namespace kiln {

TensorRef block(const TensorRef& t, const Dims& start, const Shape& shape) {
  int64_t offset = 0;
  for (int d = 0; d < t.rank(); ++d) offset += start[d] * t.strides[d];
  return {static_cast<char*>(t.data) + offset * int64_t(itemsize(t.dtype)), t.dtype, shape,
          t.strides};
}

TensorRef block_on_axis(const TensorRef& t, int axis, int64_t start, int64_t n) {
  Dims at = Dims::filled(t.rank(), 0);
  at[axis] = start;
  Shape shape = t.shape;
  shape[axis] = n;
  return block(t, at, shape);
}

void concat_parts(const KernelArgs& a, StridedCopyFn copy) {
  const TensorRef& out = a.out[0];
  int axis = normalize_axis(a.attrs.i("axis"), out.rank(), "concat");
  int64_t start = 0;
  for (const TensorRef& in : a.in) {
    int64_t n = in.shape[axis];
    if (in.numel() > 0) copy(block_on_axis(out, axis, start, n), in);
    start += n;
  }
}

void split_parts(const KernelArgs& a, StridedCopyFn copy) {
  const TensorRef& in = a.in[0];
  int axis = normalize_axis(a.attrs.i("axis"), in.rank(), "split");
  int64_t start = 0;
  for (const TensorRef& out : a.out) {
    int64_t n = out.shape[axis];
    if (out.numel() > 0) copy(out, block_on_axis(in, axis, start, n));
    start += n;
  }
}

TensorRef pad_interior(const KernelArgs& a) {
  const TensorRef& out = a.out[0];
  const auto& pads = a.attrs.ints("pads");
  Dims at = Dims::filled(out.rank(), 0);
  for (int d = 0; d < out.rank(); ++d) at[d] = pads[2 * d];
  return block(out, at, a.in[0].shape);
}

std::vector<bool> reduced_axes(const KernelArgs& a) {
  const int rank = a.in[0].rank();
  std::vector<bool> reduced(size_t(std::max(rank, 1)), false);
  const char* what = a.op.name.c_str();
  if (a.attrs.has("axis")) {
    reduced[normalize_axis(a.attrs.i("axis"), rank, what)] = true;
    return reduced;
  }
  const auto& axes = a.attrs.ints("axes");
  if (axes.empty()) reduced.assign(reduced.size(), true);
  for (int64_t axis : axes) reduced[normalize_axis(axis, rank, what)] = true;
  return reduced;
}

AxisSplit split_at(const Shape& shape, int axis) {
  AxisSplit s;
  for (int d = 0; d < shape.size(); ++d) {
    if (d < axis) s.outer *= shape[d];
    else if (d == axis) s.size = shape[d];
    else s.inner *= shape[d];
  }
  return s;
}

}  // namespace kiln
