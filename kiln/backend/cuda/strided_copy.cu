#include "kiln/backend/cuda/strided_copy.h"

#include <cstdint>

#include "kiln/backend/cuda/check.h"
#include "kiln/backend/cuda/kernels/strided_copy.cuh"
#include "kiln/backend/cuda/stream.h"
#include "kiln/base/error.h"

namespace kiln::cuda {
namespace {

template <class W>
void launch(const TensorRef& dst, const TensorRef& src, long long n, cudaStream_t stream) {
  strided_copy_k<W><<<grid_for(n), kBlock, 0, stream>>>(
      dst.ptr<W>(), layout_of(dst), src.ptr<const W>(), layout_of(src), n);
  KILN_CUDA_CHECK_LAUNCH();
}

}  // namespace

void strided_copy(const TensorRef& dst, const TensorRef& src) {
  strided_copy(dst, src, current_stream());
}

void strided_copy(const TensorRef& dst, const TensorRef& src, cudaStream_t stream) {
  KILN_CHECK(dst.dtype == src.dtype && dst.shape == src.shape, "CUDA strided copy: ",
             dtype_name(dst.dtype), to_string(dst.shape), " from ", dtype_name(src.dtype),
             to_string(src.shape), "; the dtypes and shapes must match");
  const long long n = dst.numel();
  if (n == 0) return;
  switch (itemsize(dst.dtype)) {
    case 1: return launch<uint8_t>(dst, src, n, stream);
    case 2: return launch<uint16_t>(dst, src, n, stream);
    case 4: return launch<uint32_t>(dst, src, n, stream);
    case 8: return launch<uint64_t>(dst, src, n, stream);
  }
  fail("CUDA strided copy: no copy for ", dtype_name(dst.dtype));
}

void copy_on_stream(const TensorRef& dst, const TensorRef& src, cudaStream_t stream) {
  if (!dst.contiguous() || !src.contiguous() || dst.dtype != src.dtype || dst.shape != src.shape)
    return strided_copy(dst, src, stream);
  if (const size_t bytes = size_t(dst.numel()) * itemsize(dst.dtype))
    KILN_CUDA_CHECK(cudaMemcpyAsync(dst.data, src.data, bytes, cudaMemcpyDefault, stream));
}

}  // namespace kiln::cuda
