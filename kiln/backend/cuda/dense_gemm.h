// One cuBLASLt product on dense row-major device buffers, for kernels that
// multiply their own tiles (linear cross-entropy's vocabulary tiles):
// c[m, n] = op(a) op(b), or c += op(a) op(b) with `accumulate`. a and b share
// the dtype `in`; c is `in` or, for 16-bit `in`, f32 (products accumulate in
// f32, f64 for f64, with no TF32). The algorithm is the matmul kernel's
// (matmul.cc): chosen once per problem, summing each dot product in one
// fixed order, so results are the same on every run.
#pragma once
#include <cstdint>

#include "kiln/base/dtype.h"

namespace kiln::cuda {

// Workspace bytes a product may use; the caller passes a buffer this large.
inline constexpr uint64_t kGemmWorkspace = uint64_t(32) << 20;  // cuBLASLt's advice on Hopper

struct DenseGemm {
  DType in = DType::f32, out = DType::f32;
  bool transpose_a = false, transpose_b = false;  // a is stored [k, m], b [n, k]
  int64_t m = 0, n = 0, k = 0;                    // k > 0
  const void* a = nullptr;
  int64_t lda = 0;  // row strides in elements
  const void* b = nullptr;
  int64_t ldb = 0;
  void* c = nullptr;
  int64_t ldc = 0;
  bool accumulate = false;
  void* workspace = nullptr;  // kGemmWorkspace bytes of device memory
};

// Enqueues the product on the current stream.
void dense_gemm(const DenseGemm& g);

}  // namespace kiln::cuda
