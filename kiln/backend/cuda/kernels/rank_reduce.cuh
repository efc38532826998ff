// The kernel of rank_ordered_reduce (rank_reduce.h, launched by
// rank_reduce.cu): n ranks' parts combined element by element in rank
// order, with kiln::dist::reduce_in_order's arithmetic.
#pragma once
#include <type_traits>

#include "kiln/backend/cuda/kernels/common.cuh"
#include "kiln/base/reduce_op.h"

namespace kiln::cuda::rank_reduce {

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

}  // namespace kiln::cuda::rank_reduce
