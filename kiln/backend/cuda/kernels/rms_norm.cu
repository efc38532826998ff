// rms_norm and rms_norm_backward on CUDA: the launches of rms_norm.cuh's
// kernels, which give the CPU's bits.
#include "kiln/backend/cuda/kernels/rms_norm.cuh"
#include "kiln/backend/cuda/scratch.h"

namespace kiln::cuda {
namespace {

using namespace rms;

void rms_norm_kernel(const KernelArgs& a) {
  visit_floating_storage(a.in[0].dtype, "rms_norm", [&](auto tag) {
    using T = decltype(tag);
    const long long d = a.in[1].shape[0], rows = d ? a.in[0].numel() / d : 0;
    if (rows == 0) return;
    rms_norm_k<T><<<row_blocks(rows), 32 * kRowsPerBlock, 0, current_stream()>>>(
        a.in[0].ptr<const T>(), a.in[1].ptr<const T>(), a.out[0].ptr<T>(), rows, d,
        compute_t<T>(a.attrs.f("eps")));
    KILN_CUDA_CHECK_LAUNCH();
  });
}

void rms_norm_backward_kernel(const KernelArgs& a) {
  visit_floating_storage(a.in[0].dtype, "rms_norm_backward", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const long long d = a.in[1].shape[0], rows = d ? a.in[0].numel() / d : 0;
    const long long chunks = (rows + kChunk - 1) / kChunk;
    const T *x = a.in[0].ptr<const T>(), *w = a.in[1].ptr<const T>(), *g = a.in[2].ptr<const T>();
    const Scratch scratch(size_t(rows + chunks * d) * sizeof(C));
    C* inv = scratch.as<C>();
    C* partial = inv + rows;
    if (rows > 0) {
      rms_norm_dx_k<T><<<row_blocks(rows), 32 * kRowsPerBlock, 0, current_stream()>>>(
          x, w, g, a.out[0].ptr<T>(), inv, rows, d, C(a.attrs.f("eps")));
      KILN_CUDA_CHECK_LAUNCH();
    }
    launch_n(rms_norm_dw_partial_k<T>, chunks * d, x, g, inv, partial, rows, d);
    launch_n(rms_norm_dw_k<T>, d, partial, a.out[1].ptr<T>(), chunks);
  });
}

const KernelRegistrar registrations[] = {
    {DeviceKind::cuda, "rms_norm", {rms_norm_kernel, false}},
    {DeviceKind::cuda, "rms_norm_backward", {rms_norm_backward_kernel, false}},
};

}  // namespace
}  // namespace kiln::cuda
