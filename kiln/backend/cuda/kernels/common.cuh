// What the hand-written CUDA kernels share: loads and stores in the compute
// type (f32 for 16-bit floats, as on the CPU), the floating dtype dispatch,
// grid-stride loops, shared memory and the launch check.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "kiln/backend/cuda/check.h"
#include "kiln/backend/cuda/stream.h"
#include "kiln/base/dtype.h"
#include "kiln/base/error.h"
#include "kiln/codegen/scalar.h"
#include "kiln/runtime/kernel.h"

namespace kiln::cuda {

// The CPU's conversions (kiln/codegen/scalar.h), so stored values round as
// the CPU rounds them, bit for bit.
using codegen::compute_t;
using codegen::narrow;
using codegen::round_to;
using codegen::widen;

// visit_dtype (kiln/base/dtype.h) for the floating dtypes; `op` names the
// kernel in the error.
template <class F>
void visit_floating_storage(DType t, const std::string& op, F&& f) {
  KILN_CHECK(is_floating(t), op, " (CUDA): dtype ", dtype_name(t),
             " is not supported; use a floating tensor (f32, bf16, f16 or f64)");
  visit_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T> || codegen::is_half_v<T>) f(tag);
  });
}

// CUDA's type for kiln's 16-bit floats (the same bits), as tensor-core
// fragments take them.
template <class T>
struct TensorCoreType {};
template <>
struct TensorCoreType<bf16> {
  using type = __nv_bfloat16;
};
template <>
struct TensorCoreType<f16> {
  using type = __half;
};
template <class T>
using tensor_core_t = typename TensorCoreType<T>::type;

// Grid-stride loops over [0, n).
__device__ inline long long grid_start() { return blockIdx.x * (long long)blockDim.x + threadIdx.x; }
__device__ inline long long grid_step() { return (long long)gridDim.x * blockDim.x; }

// The grid of a kernel that gives each of `rows` rows a block of its own,
// grid-strided beyond 2^20 rows.
inline unsigned row_grid(long long rows) { return unsigned(rows < (1LL << 20) ? rows : 1LL << 20); }

// Memory a block shares: KILN_BLOCK_SHARED declares a static array of it,
// dynamic_shared() is the launch's dynamic part. A host build of the
// kernels (tests/backend/cuda/emulated.h, which runs them on the CPU) gives
// its own definitions.
#if !defined(KILN_CUDA_EMULATED)
#define KILN_BLOCK_SHARED __shared__
__device__ inline unsigned char* dynamic_shared() {
  extern __shared__ __align__(128) unsigned char kiln_dynamic_shared[];
  return kiln_dynamic_shared;
}
#endif

#if defined(__CUDACC__)
// Launches kernel(args..., n) over n elements on the current stream.
template <class... P, class... A>
void launch_n(void (*kernel)(P...), long long n, A... args) {
  if (n <= 0) return;
  kernel<<<grid_for(n), kBlock, 0, current_stream()>>>(args..., n);
  KILN_CUDA_CHECK_LAUNCH();
}
#endif

}  // namespace kiln::cuda
