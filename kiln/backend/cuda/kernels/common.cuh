// What the hand-written CUDA kernels share: the storage types device code
// sees for each DType, their loads and stores in the compute type (f32 for
// 16-bit floats, as on the CPU; 16-bit values round to nearest even on
// store), dtype dispatch, grid-stride loops and the launch check.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "kiln/backend/cuda/check.h"
#include "kiln/backend/cuda/stream.h"
#include "kiln/base/error.h"
#include "kiln/runtime/kernel.h"

namespace kiln::cuda {

using bf16_t = __nv_bfloat16;
using f16_t = __half;

template <class T> struct Type { using type = T; };

// Calls f(Type<T>{}) with T the device storage type of `t`.
template <class F>
void visit_storage(DType t, F&& f) {
  switch (t) {
    case DType::f32: return f(Type<float>{});
    case DType::bf16: return f(Type<bf16_t>{});
    case DType::f16: return f(Type<f16_t>{});
    case DType::f64: return f(Type<double>{});
    case DType::i32: return f(Type<int32_t>{});
    case DType::i64: return f(Type<int64_t>{});
    case DType::b8: return f(Type<bool>{});
  }
  fail("CUDA kernel: unknown dtype");
}

// The same for the floating dtypes; `op` names the kernel in the error.
template <class F>
void visit_floating_storage(DType t, const std::string& op, F&& f) {
  KILN_CHECK(is_floating(t), op, " (CUDA): dtype ", dtype_name(t),
             " is not supported; use a floating tensor (f32, bf16, f16 or f64)");
  visit_storage(t, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, bf16_t> ||
                  std::is_same_v<T, f16_t>)
      f(tag);
  });
}

template <class T> struct compute { using type = T; };
template <> struct compute<bf16_t> { using type = float; };
template <> struct compute<f16_t> { using type = float; };
template <class T> using compute_t = typename compute<T>::type;

template <class T>
__device__ inline compute_t<T> widen(T x) {
  if constexpr (std::is_same_v<T, bf16_t>) return __bfloat162float(x);
  else if constexpr (std::is_same_v<T, f16_t>) return __half2float(x);
  else return x;
}

// 16-bit floats round from f32 (an f64 value first rounds to f32), as
// kiln/backend/cpu/scalar.h's narrow does.
template <class T, class C>
__device__ inline T narrow(C v) {
  if constexpr (std::is_same_v<T, bf16_t>) return __float2bfloat16_rn(static_cast<float>(v));
  else if constexpr (std::is_same_v<T, f16_t>) return __float2half_rn(static_cast<float>(v));
  else return static_cast<T>(v);
}

// What storing v as T and loading it back gives.
template <class T, class C>
__device__ inline compute_t<T> round_to(C v) {
  return widen(narrow<T>(v));
}

__device__ inline float exp_of(float x) { return expf(x); }
__device__ inline double exp_of(double x) { return exp(x); }
__device__ inline float log_of(float x) { return logf(x); }
__device__ inline double log_of(double x) { return log(x); }

// Grid-stride loops over [0, n).
__device__ inline long long grid_start() { return blockIdx.x * (long long)blockDim.x + threadIdx.x; }
__device__ inline long long grid_step() { return (long long)gridDim.x * blockDim.x; }

// Launches kernel(args..., n) over n elements on the current stream.
template <class... P, class... A>
void launch_n(void (*kernel)(P...), long long n, A... args) {
  if (n <= 0) return;
  kernel<<<grid_for(n), kBlock, 0, current_stream()>>>(args..., n);
  KILN_CUDA_CHECK_LAUNCH();
}

}  // namespace kiln::cuda
