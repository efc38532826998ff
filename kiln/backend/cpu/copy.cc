// Data-movement kernels: copy, cast, view ops run as copies, slice_scatter,
// offload and reload (copies between the CPU's two pools), and the creation
// ops full and arange.
#include <cmath>

#include "kiln/backend/cpu/isa.h"
#include "kiln/backend/cpu/loops.h"
#include "kiln/base/error.h"
#include "kiln/runtime/backend.h"

namespace kiln::cpu {
namespace {

void copy_into(const TensorRef& dst, const TensorRef& src) { find_backend(DeviceKind::cpu)->strided_copy(dst, src); }

void copy_kernel(const KernelArgs& a) { copy_into(a.out[0], a.in[0]); }

void cast_kernel(const KernelArgs& a) {
  visit_dtype(a.out[0].dtype, [&](auto out_tag) {
    visit_dtype(a.in[0].dtype, [&](auto in_tag) {
      using O = decltype(out_tag);
      using I = decltype(in_tag);
      map<O, I>(a.out[0], [](auto x) { return x; }, {&a.in[0]});
    });
  });
}

// View ops run as kernels (inside graphs): copy the view the op describes.
void view_kernel(const KernelArgs& a) {
  const TensorRef& in = a.in[0];
  std::optional<ir::Layout> layout = a.op.view(ir::Layout{in.shape, in.strides, 0}, a.attrs);
  TensorRef src = in;
  if (layout) {
    src.data = static_cast<char*>(in.data) + layout->offset * int64_t(itemsize(in.dtype));
    src.shape = layout->shape;
    src.strides = layout->strides;
    copy_into(a.out[0], src);
  } else {
    // A reshape of a non-contiguous input: copy in row-major order.
    TensorRef dst = a.out[0];
    dst.shape = in.shape;
    dst.strides = contiguous_strides(in.shape);
    copy_into(dst, in);
  }
}

void slice_scatter_kernel(const KernelArgs& a) {
  copy_into(a.out[0], a.in[0]);
  const ir::OpDef& slice = ir::get_op("slice");
  TensorRef out = a.out[0];
  ir::Layout l = *slice.view(ir::Layout{out.shape, out.strides, 0}, a.attrs);
  TensorRef region{static_cast<char*>(out.data) + l.offset * int64_t(itemsize(out.dtype)), out.dtype,
                   l.shape, l.strides};
  copy_into(region, a.in[1]);
}

void full_kernel(const KernelArgs& a) {
  double v = a.attrs.f("value");
  visit_dtype(a.out[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    C c = static_cast<C>(v);
    map<T>(a.out[0], [c]() { return c; }, {});
  });
}

void arange_kernel(const KernelArgs& a) {
  double start = a.attrs.f("start"), step = a.attrs.f("step");
  visit_dtype(a.out[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    T* out = a.out[0].ptr<T>();
    int64_t n = a.out[0].numel();
    parallel_for(n, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) store<T>(reinterpret_cast<char*>(out + i), start + double(i) * step);
    });
  });
}

const IsaKernelRegistrar registrations[] = {
    {DeviceKind::cpu, "copy", {copy_kernel, true}},
    {DeviceKind::cpu, "cast", {cast_kernel, true}},
    {DeviceKind::cpu, "reshape", {view_kernel, true}},
    {DeviceKind::cpu, "permute", {view_kernel, true}},
    {DeviceKind::cpu, "slice", {view_kernel, true}},
    {DeviceKind::cpu, "expand", {view_kernel, true}},
    {DeviceKind::cpu, "squeeze", {view_kernel, true}},
    {DeviceKind::cpu, "unsqueeze", {view_kernel, true}},
    {DeviceKind::cpu, "optimization_barrier", {view_kernel, true}},
    {DeviceKind::cpu, "offload", {copy_kernel, true}},
    {DeviceKind::cpu, "reload", {copy_kernel, true}},
    {DeviceKind::cpu, "slice_scatter", {slice_scatter_kernel, true}},
    {DeviceKind::cpu, "full", {full_kernel, false}},
    {DeviceKind::cpu, "arange", {arange_kernel, false}},
};

}  // namespace
}  // namespace kiln::cpu
