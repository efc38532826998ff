// Kernels for concat, split and pad: strided copies between a tensor and a
// block of another.
#include "kiln/backend/cuda/kernels/fill.cuh"
#include "kiln/backend/cuda/strided_copy.h"

namespace kiln::cuda {
namespace {

// The block of `t` that starts at `start[d]` in each dimension and has `shape`.
TensorRef block(const TensorRef& t, const Dims& start, const Shape& shape) {
  int64_t offset = 0;
  for (int d = 0; d < t.rank(); ++d) offset += start[d] * t.strides[d];
  return {static_cast<char*>(t.data) + offset * int64_t(itemsize(t.dtype)), t.dtype, shape,
          t.strides};
}

// The block of `t` at [start, start + n) along `axis`.
TensorRef block_on_axis(const TensorRef& t, int axis, int64_t start, int64_t n) {
  Dims at = Dims::filled(t.rank(), 0);
  at[axis] = start;
  Shape shape = t.shape;
  shape[axis] = n;
  return block(t, at, shape);
}

void concat_kernel(const KernelArgs& a) {
  const TensorRef& out = a.out[0];
  int axis = normalize_axis(a.attrs.i("axis"), out.rank(), "concat");
  int64_t start = 0;
  for (const TensorRef& in : a.in) {
    int64_t n = in.shape[axis];
    if (in.numel() > 0) strided_copy(block_on_axis(out, axis, start, n), in);
    start += n;
  }
}

void split_kernel(const KernelArgs& a) {
  const TensorRef& in = a.in[0];
  int axis = normalize_axis(a.attrs.i("axis"), in.rank(), "split");
  int64_t start = 0;
  for (const TensorRef& out : a.out) {
    int64_t n = out.shape[axis];
    if (out.numel() > 0) strided_copy(out, block_on_axis(in, axis, start, n));
    start += n;
  }
}

void pad_kernel(const KernelArgs& a) {
  const TensorRef& out = a.out[0];
  fill(out, a.attrs.f("value"));
  const auto& pads = a.attrs.ints("pads");
  Dims at = Dims::filled(out.rank(), 0);
  for (int d = 0; d < out.rank(); ++d) at[d] = pads[2 * d];
  if (a.in[0].numel() > 0) strided_copy(block(out, at, a.in[0].shape), a.in[0]);
}

const KernelRegistrar registrations[] = {
    {DeviceKind::cuda, "concat", {concat_kernel, true}},
    {DeviceKind::cuda, "split", {split_kernel, true}},
    {DeviceKind::cuda, "pad", {pad_kernel, true}},
};

}  // namespace
}  // namespace kiln::cuda
