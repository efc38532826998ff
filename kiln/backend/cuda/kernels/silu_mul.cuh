// The kernels of silu_mul and silu_mul_backward (launched by silu_mul.cu)
// with the CPU kernels' arithmetic (kiln/backend/cpu/silu_mul.cc): f32
// compute (f64 for f64), one rounding. The sigmoid's exp is CUDA's (expf
// within 2 ulp; the CPU's own f32 exp within 1), so results may differ from
// the CPU's in the last bits.
#pragma once
#include "kiln/backend/cuda/kernels/common.cuh"
#include "kiln/codegen/elementwise_ops.h"

namespace kiln::cuda::silu {

using codegen::Sigmoid;  // 1 / (1 + exp(-x)), as the CPU's sigmoid_of

template <class T>
__global__ void silu_mul_k(const T* gate, const T* up, T* out, long long n) {
  for (long long i = grid_start(); i < n; i += grid_step()) {
    const compute_t<T> g = widen(gate[i]);
    out[i] = narrow<T>(g * Sigmoid{}(g) * widen(up[i]));
  }
}

template <class T>
__global__ void silu_mul_backward_k(const T* gate, const T* up, const T* dy, T* dgate, T* dup,
                                    long long n) {
  using C = compute_t<T>;
  for (long long i = grid_start(); i < n; i += grid_step()) {
    const C g = widen(gate[i]), u = widen(up[i]), d = widen(dy[i]), s = Sigmoid{}(g);
    dgate[i] = narrow<T>(d * u * s * (C(1) + g * (C(1) - s)));
    dup[i] = narrow<T>(d * g * s);
  }
}

}  // namespace kiln::cuda::silu
