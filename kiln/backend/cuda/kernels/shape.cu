// Kernels for concat, split and pad: strided copies between a tensor and a
// block of another.
#include "kiln/backend/cuda/kernels/fill.cuh"
#include "kiln/backend/cuda/strided_copy.h"
#include "kiln/runtime/kernel_layout.h"

namespace kiln::cuda {
namespace {

void concat_kernel(const KernelArgs& a) { concat_parts(a, strided_copy); }
void split_kernel(const KernelArgs& a) { split_parts(a, strided_copy); }

void pad_kernel(const KernelArgs& a) {
  const TensorRef& out = a.out[0];
  fill(out, a.attrs.f("value"));
  if (a.in[0].numel() > 0) strided_copy(pad_interior(a), a.in[0]);
}

const KernelRegistrar registrations[] = {
    {DeviceKind::cuda, "concat", {concat_kernel, true}},
    {DeviceKind::cuda, "split", {split_kernel, true}},
    {DeviceKind::cuda, "pad", {pad_kernel, true}},
};

}  // namespace
}  // namespace kiln::cuda
