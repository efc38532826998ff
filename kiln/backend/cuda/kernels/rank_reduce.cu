#include "kiln/backend/cuda/rank_reduce.h"

#include "kiln/backend/cuda/kernels/rank_reduce.cuh"

namespace kiln::cuda {

void rank_ordered_reduce(void* out, const void* parts, int n, int64_t count, int64_t stride,
                         DType dtype, ReduceOp op, cudaStream_t stream) {
  if (count <= 0) return;
  KILN_CHECK(n > 0, "rank_ordered_reduce: nothing to reduce");
  visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      fail("cannot reduce bool buffers; convert them to an integer dtype");
    } else {
      rank_reduce::rank_reduce_k<T><<<grid_for(count), kBlock, 0, stream>>>(
          static_cast<T*>(out), static_cast<const T*>(parts), n, stride, op, count);
      KILN_CUDA_CHECK_LAUNCH();
    }
  });
}

}  // namespace kiln::cuda
