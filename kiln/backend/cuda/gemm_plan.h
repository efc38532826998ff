// A matmul as cuBLASLt problems, worked out on the host (a pure function,
// tested without a GPU). kiln's matrices are row-major and cuBLASLt's
// column-major, so the row-major C = op(a) op(b) is computed as the
// column-major C^T = op(b)^T op(a)^T: cuBLASLt's first operand is kiln's b,
// its second kiln's a, and nothing is copied (a transpose, given as a flag
// or as a transposed view's strides, is an op flag; a broadcast batch dim a
// zero batch stride). The batch dims one stride can
// step through become cuBLASLt's strided batch; the others are looped, one
// launch per index. The problem (without the pointers) keys the choice of
// algorithm, so it holds everything that choice depends on.
#pragma once
#include <compare>
#include <cstdint>
#include <vector>

#include "kiln/backend/cuda/dense_gemm.h"
#include "kiln/runtime/kernel.h"

namespace kiln::cuda {

struct GemmMatrix {
  int64_t rows = 0, cols = 0, ld = 0;  // column-major, as cuBLASLt is given it
  int64_t batch_stride = 0;            // in elements; 0 for a broadcast operand
  int64_t align = 0;  // bytes every launch's and batch's start is a multiple of (at most 256)
  auto operator<=>(const GemmMatrix&) const = default;
};

struct GemmProblem {
  DType dtype = DType::f32;      // the operands'
  DType out_dtype = DType::f32;  // C and D's: dtype, or f32 for 16-bit operands
  bool transpose_first = false, transpose_second = false;  // cuBLASLt's op(A), op(B)
  int64_t m = 0, n = 0, k = 0;                             // cuBLASLt's: m = kiln's N, n = kiln's M
  int64_t batch = 1;
  GemmMatrix first, second, out;  // cuBLASLt's A (kiln's b), B (kiln's a) and C = D
  auto operator<=>(const GemmProblem&) const = default;
};

// Element offsets of kiln's a, b and c for one cuBLASLt call.
struct GemmLaunch {
  int64_t a = 0, b = 0, c = 0;
  auto operator<=>(const GemmLaunch&) const = default;
};

struct GemmPlan {
  GemmProblem problem;
  std::vector<GemmLaunch> launches;
};

// Whether cuBLASLt can read t's matrices where they are: row-major, or
// column-major (a transposed view, read with the transpose flag flipped).
// Any batch strides are fine. Other layouts (an expanded matrix dim, a
// strided slice of columns) must be copied first.
bool gemm_layout_ok(const TensorRef& t);

// a, b: the matmul op's inputs, each gemm_layout_ok; c: its output,
// contiguous [batch..., M, N].
GemmPlan plan_gemm(const TensorRef& a, const TensorRef& b, const TensorRef& c, bool transpose_a,
                   bool transpose_b);

// The problem of one dense row-major product (one launch, no batch).
GemmProblem plan_dense_gemm(const DenseGemm& g);

}  // namespace kiln::cuda
