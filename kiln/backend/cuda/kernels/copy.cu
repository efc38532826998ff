// Data-movement kernels: copy, the view ops run as copies (inside graphs),
// slice_scatter, all strided copies (kiln::cuda::strided_copy), and
// offload and reload between device memory and the pinned offload pool.
#include <cuda_runtime.h>

#include "kiln/backend/cuda/stream.h"
#include "kiln/backend/cuda/strided_copy.h"
#include "kiln/ir/op.h"

namespace kiln::cuda {
namespace {

// The view `layout` describes over t's buffer.
TensorRef viewed(const TensorRef& t, const ir::Layout& layout) {
  return {static_cast<char*>(t.data) + layout.offset * int64_t(itemsize(t.dtype)), t.dtype,
          layout.shape, layout.strides};
}

void copy_kernel(const KernelArgs& a) { strided_copy(a.out[0], a.in[0]); }

void view_kernel(const KernelArgs& a) {
  const TensorRef& in = a.in[0];
  std::optional<ir::Layout> layout = a.op.view(ir::Layout{in.shape, in.strides, 0}, a.attrs);
  if (layout) return strided_copy(a.out[0], viewed(in, *layout));
  // A reshape of a non-contiguous input: copy in row-major order.
  TensorRef dst = a.out[0];
  dst.shape = in.shape;
  dst.strides = contiguous_strides(in.shape);
  strided_copy(dst, in);
}

void slice_scatter_kernel(const KernelArgs& a) {
  const TensorRef& out = a.out[0];
  strided_copy(out, a.in[0]);
  ir::Layout region = *ir::get_op("slice").view(ir::Layout{out.shape, out.strides, 0}, a.attrs);
  strided_copy(viewed(out, region), a.in[1]);
}

// offload and reload: dense buffers move as one asynchronous copy on the
// device's stream (the pinned side lets it overlap the kernels around it
// on the copy engine); a strided input is gathered by the copy kernel,
// which reads mapped host memory in place.
void transfer_kernel(const KernelArgs& a) { copy_on_stream(a.out[0], a.in[0], current_stream()); }

const KernelRegistrar registrations[] = {
    {DeviceKind::cuda, "offload", {transfer_kernel, true}},
    {DeviceKind::cuda, "reload", {transfer_kernel, true}},
    {DeviceKind::cuda, "copy", {copy_kernel, true}},
    {DeviceKind::cuda, "reshape", {view_kernel, true}},
    {DeviceKind::cuda, "permute", {view_kernel, true}},
    {DeviceKind::cuda, "slice", {view_kernel, true}},
    {DeviceKind::cuda, "expand", {view_kernel, true}},
    {DeviceKind::cuda, "squeeze", {view_kernel, true}},
    {DeviceKind::cuda, "unsqueeze", {view_kernel, true}},
    {DeviceKind::cuda, "optimization_barrier", {view_kernel, true}},
    {DeviceKind::cuda, "slice_scatter", {slice_scatter_kernel, true}},
};

}  // namespace
}  // namespace kiln::cuda
