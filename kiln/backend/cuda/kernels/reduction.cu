// argmax, logsumexp, var, softmax and log_softmax on CUDA: the launches of
// reduction.cuh's kernels over the input's layout. The sum, mean, max and
// min ops live with the code generator.
#include <vector>

#include "kiln/backend/cuda/kernels/reduction.cuh"
#include "kiln/runtime/kernel_layout.h"

namespace kiln::cuda {
namespace {

using namespace rowwise;

// The input's plan and, for the softmaxes, the output's (contiguous).
RowPlan input_plan(const KernelArgs& a) {
  return plan_of(a.in[0].shape, a.in[0].strides, reduced_axes(a));
}
RowPlan output_plan(const KernelArgs& a) {
  return plan_of(a.in[0].shape, contiguous_strides(a.in[0].shape), reduced_axes(a));
}

// Runs kernel<<<rows>>> (one block per row; grid-strided beyond 2^20 rows).
template <class K, class... A>
void launch_rows(K kernel, long long rows, A... args) {
  if (rows <= 0) return;
  kernel<<<row_grid(rows), kFoldThreads, 0, current_stream()>>>(args...);
  KILN_CUDA_CHECK_LAUNCH();
}

void check_same_dtype(const KernelArgs& a) {
  KILN_CHECK(a.out[0].dtype == a.in[0].dtype, a.op.name, " (CUDA): output dtype ",
             dtype_name(a.out[0].dtype), " differs from the input's ", dtype_name(a.in[0].dtype));
}

void logsumexp_kernel(const KernelArgs& a) {
  check_same_dtype(a);
  visit_floating_storage(a.in[0].dtype, a.op.name, [&](auto tag) {
    using T = decltype(tag);
    RowPlan p = input_plan(a);
    launch_rows(logsumexp_k<T>, p.rows, a.in[0].ptr<const T>(), p, MaxOp<T>{},
                a.out[0].ptr<T>());
  });
}

void var_kernel(const KernelArgs& a) {
  check_same_dtype(a);
  visit_floating_storage(a.in[0].dtype, a.op.name, [&](auto tag) {
    using T = decltype(tag);
    RowPlan p = input_plan(a);
    launch_rows(var_k<T>, p.rows, a.in[0].ptr<const T>(), p, (long long)a.attrs.i("correction"),
                a.out[0].ptr<T>());
  });
}

template <bool kLog>
void softmax_kernel(const KernelArgs& a) {
  check_same_dtype(a);
  visit_floating_storage(a.in[0].dtype, a.op.name, [&](auto tag) {
    using T = decltype(tag);
    RowPlan p = input_plan(a);
    launch_rows(softmax_k<T, kLog>, p.rows, a.in[0].ptr<const T>(), p, output_plan(a),
                MaxOp<T>{}, a.out[0].ptr<T>());
  });
}

void argmax_kernel(const KernelArgs& a) {
  KILN_CHECK(a.in[0].dtype != DType::b8, "argmax (CUDA): bool input is not supported");
  visit_dtype(a.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) {
      RowPlan p = input_plan(a);
      launch_rows(argmax_k<T>, p.rows, a.in[0].ptr<const T>(), p, MaxOp<T>{},
                  a.out[0].ptr<int64_t>());
    }
  });
}

const KernelRegistrar registrations[] = {
    {DeviceKind::cuda, "argmax", {argmax_kernel, true}},
    {DeviceKind::cuda, "logsumexp", {logsumexp_kernel, true}},
    {DeviceKind::cuda, "var", {var_kernel, true}},
    {DeviceKind::cuda, "softmax", {softmax_kernel<false>, true}},
    {DeviceKind::cuda, "log_softmax", {softmax_kernel<true>, true}},
};

}  // namespace
}  // namespace kiln::cuda
