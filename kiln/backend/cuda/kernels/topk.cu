// topk on CUDA: the launch of topk.cuh's kernel over the axis's lines.
#include "kiln/backend/cuda/kernels/topk.cuh"

namespace kiln::cuda {
namespace {

using namespace topk;

void topk_kernel(const KernelArgs& a) {
  const TensorRef& x = a.in[0];
  const int axis = normalize_axis(a.attrs.i("axis"), x.rank(), "topk");
  const long long k = a.attrs.i("k"), n = x.shape[axis];
  long long outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= x.shape[d];
  for (int d = axis + 1; d < x.rank(); ++d) inner *= x.shape[d];
  const long long lines = outer * inner;
  if (k == 0 || lines == 0) return;
  KILN_CHECK(x.dtype != DType::b8, "topk (CUDA): bool input is not supported");
  visit_dtype(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) {
      topk_k<T><<<row_grid(lines), kThreads, 0, current_stream()>>>(
          x.ptr<const T>(), a.out[0].ptr<T>(), a.out[1].ptr<int64_t>(), lines, n, inner, k);
      KILN_CUDA_CHECK_LAUNCH();
    }
  });
}

const KernelRegistrar registrations[] = {
    {DeviceKind::cuda, "topk", {topk_kernel, false}},
};

}  // namespace
}  // namespace kiln::cuda
