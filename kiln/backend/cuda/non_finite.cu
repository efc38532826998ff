#include "kiln/backend/cuda/non_finite.h"

#include <cstdint>

#include "kiln/backend/cuda/check.h"
#include "kiln/backend/cuda/kernels/non_finite.cuh"
#include "kiln/backend/cuda/scratch.h"
#include "kiln/backend/cuda/stream.h"
#include "kiln/base/error.h"

namespace kiln::cuda {
namespace {

template <class W, W kExponent, W kMantissa>
void launch(const TensorRef& t, unsigned long long* first) {
  const long long n = t.numel();
  non_finite::find_kernel<W, kExponent, kMantissa><<<grid_for(n), kBlock, 0, current_stream()>>>(
      t.ptr<const W>(), layout_of(t), n, first);
  KILN_CUDA_CHECK_LAUNCH();
}

}  // namespace

NonFinite find_non_finite(const TensorRef& t) {
  if (t.numel() == 0) return {};
  cudaStream_t s = current_stream();
  // first[0]: the first NaN, first[1]: the first infinity; all ones if none.
  const Scratch scratch(2 * sizeof(unsigned long long));
  auto* first = scratch.as<unsigned long long>();
  KILN_CUDA_CHECK(cudaMemsetAsync(first, 0xff, 2 * sizeof(unsigned long long), s));
  switch (t.dtype) {
    case DType::f32: launch<uint32_t, 0x7f800000u, 0x007fffffu>(t, first); break;
    case DType::f64:
      launch<uint64_t, 0x7ff0000000000000ull, 0x000fffffffffffffull>(t, first);
      break;
    case DType::bf16: launch<uint16_t, 0x7f80, 0x007f>(t, first); break;
    case DType::f16: launch<uint16_t, 0x7c00, 0x03ff>(t, first); break;
    default: fail("NaN/Inf check: ", dtype_name(t.dtype), " is not a floating dtype");
  }
  unsigned long long host[2];
  KILN_CUDA_CHECK(cudaMemcpyAsync(host, first, sizeof host, cudaMemcpyDeviceToHost, s));
  KILN_CUDA_CHECK(cudaStreamSynchronize(s));
  const unsigned long long none = ~0ull;
  if (host[0] == none && host[1] == none) return {};
  const bool nan = host[0] < host[1];
  return {int64_t(nan ? host[0] : host[1]), nan};
}

}  // namespace kiln::cuda
