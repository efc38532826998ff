// Kernels for concat, split and pad: strided copies between a tensor and a
// block of another.
#include "kiln/backend/cpu/loops.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/kernel_layout.h"

namespace kiln::cpu {
namespace {

void copy_into(const TensorRef& dst, const TensorRef& src) {
  find_backend(DeviceKind::cpu)->strided_copy(dst, src);
}

void concat_kernel(const KernelArgs& a) { concat_parts(a, copy_into); }
void split_kernel(const KernelArgs& a) { split_parts(a, copy_into); }

void pad_kernel(const KernelArgs& a) {
  const TensorRef& out = a.out[0];
  double value = a.attrs.f("value");
  visit_dtype(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    compute_t<T> v = static_cast<compute_t<T>>(value);
    map<T>(out, [v]() { return v; }, {});
  });
  if (a.in[0].numel() > 0) copy_into(pad_interior(a), a.in[0]);
}

const KernelRegistrar registrations[] = {
    {DeviceKind::cpu, "concat", {concat_kernel, true}},
    {DeviceKind::cpu, "split", {split_kernel, true}},
    {DeviceKind::cpu, "pad", {pad_kernel, true}},
};

}  // namespace
}  // namespace kiln::cpu
