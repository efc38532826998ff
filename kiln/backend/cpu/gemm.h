// Row-major matrix products on raw buffers for the fused kernels, which cut
// their work into blocks themselves: C = alpha * op(A) op(B) + beta * C.
// gemm runs on the calling thread only (oneDNN's sgemm for f32, a plain loop
// for f64), so a kernel that gives each output block to one thread gets the
// same bits whatever the thread count. parallel_gemm splits C into fixed
// blocks across threads, which keeps that property.
//
// 16-bit operands (bf16, f16) multiply exactly and accumulate in f32 into an
// f32 C: by oneDNN's matmul for the type where the CPU multiplies it natively
// (matmul_path.h: AMX, AVX512-BF16), else widened to f32 (exact) for sgemm.
// Either way the result is the f32 product of the 16-bit values.
#pragma once
#include <cstdint>

#include "kiln/base/half.h"

namespace kiln::cpu {

struct GemmArgs {
  bool ta = false, tb = false;  // op(A) = A^T, op(B) = B^T
  int64_t m = 0, n = 0, k = 0;  // op(A) is [m, k], op(B) [k, n], C [m, n]
  int64_t lda = 0, ldb = 0, ldc = 0;  // row strides, in elements
};

void gemm(const GemmArgs& g, float alpha, const float* a, const float* b, float beta, float* c);
void gemm(const GemmArgs& g, double alpha, const double* a, const double* b, double beta,
          double* c);
// beta is 0 or 1 for 16-bit operands.
void gemm(const GemmArgs& g, float alpha, const bf16* a, const bf16* b, float beta, float* c);
void gemm(const GemmArgs& g, float alpha, const f16* a, const f16* b, float beta, float* c);

// As gemm, with C cut into blocks of rows x cols computed in parallel, each
// over the whole of k. Large blocks amortise the packing sgemm does per
// call (each call packs its rows of op(A) and its columns of op(B)).
template <class T, class C>
void parallel_gemm(const GemmArgs& g, C alpha, const T* a, const T* b, C beta, C* c,
                   int64_t rows = 256, int64_t cols = 1024);

}  // namespace kiln::cpu
