#include "kiln/backend/cuda/rank_reduce.h"

#include <type_traits>

#include "kiln/backend/cuda/kernels/common.cuh"

namespace kiln::cuda {
namespace {

// The type a T accumulates in: f32 for the 16-bit floats, else T itself.
template <class T>
using acc_t = std::conditional_t<codegen::is_half_v<T>, float, T>;

template <class A>
__device__ A combine(A a, A b, ReduceOp op) {
  if (op == ReduceOp::max) {
    if constexpr (std::is_floating_point_v<A>) return (a >= b || a != a) ? a : b;  // NaN wins
    else return a < b ? b : a;
  }
  if constexpr (std::is_integral_v<A>) {
    using U = std::make_unsigned_t<A>;  // sums wrap, as on the host
    return A(U(a) + U(b));
  } else {
    return a + b;
  }
}

template <class T>
__global__ void rank_reduce_k(T* out, const T* parts, int n, long long stride, ReduceOp op,
                              long long count) {
  using A = acc_t<T>;
  for (long long i = grid_start(); i < count; i += grid_step()) {
    A acc = A(widen(parts[i]));
    for (int p = 1; p < n; ++p) acc = combine(acc, A(widen(parts[p * stride + i])), op);
    if constexpr (std::is_floating_point_v<A>)
      if (op == ReduceOp::avg) acc /= A(n);
    out[i] = narrow<T>(acc);
  }
}

}  // namespace

void rank_ordered_reduce(void* out, const void* parts, int n, int64_t count, int64_t stride,
                         DType dtype, ReduceOp op, cudaStream_t stream) {
  if (count <= 0) return;
  KILN_CHECK(n > 0, "rank_ordered_reduce: nothing to reduce");
  visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      fail("cannot reduce bool buffers; convert them to an integer dtype");
    } else {
      rank_reduce_k<T><<<grid_for(count), kBlock, 0, stream>>>(
          static_cast<T*>(out), static_cast<const T*>(parts), n, stride, op, count);
      KILN_CUDA_CHECK_LAUNCH();
    }
  });
}

}  // namespace kiln::cuda
