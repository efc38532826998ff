#include "kiln/backend/cuda/gemm_plan.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>

#include "kiln/base/error.h"

namespace kiln::cuda {
namespace {

// One operand's matrix as cuBLASLt can read it: [rows, cols] row-major
// with row stride ld; `transposed` when the tensor holds it column-major
// (a transposed view), so its transpose flag flips.
struct Stored {
  int64_t rows = 0, cols = 0, ld = 0;
  bool transposed = false;
};

std::optional<Stored> stored(const TensorRef& t) {
  const int r = t.rank();
  const int64_t rows = t.shape[r - 2], cols = t.shape[r - 1];
  const int64_t row_stride = t.strides[r - 2], col_stride = t.strides[r - 1];
  // A single row's (column's) stride is never followed; cuBLASLt asks ld >= rows of
  // its column-major matrix, so rows must not overlap.
  if (cols <= 1 || col_stride == 1) {
    const int64_t ld = rows <= 1 ? std::max<int64_t>(cols, 1) : row_stride;
    if (ld >= std::max<int64_t>(cols, 1)) return Stored{rows, cols, ld, false};
  }
  if (rows <= 1 || row_stride == 1) {
    const int64_t ld = cols <= 1 ? std::max<int64_t>(rows, 1) : col_stride;
    if (ld >= std::max<int64_t>(rows, 1)) return Stored{cols, rows, ld, true};
  }
  return std::nullopt;
}

Stored stored(const TensorRef& t, const char* name) {
  std::optional<Stored> s = stored(t);
  KILN_CHECK(s, "matmul on CUDA: operand ", name, " (", dtype_name(t.dtype), to_string(t.shape),
             ", strides ", to_string(t.strides), ") is neither row- nor column-major; "
             "the kernel copies such operands first (gemm_layout_ok)");
  return *s;
}

// The stride of batch dim d of t (padded to `rank` dims), 0 if it broadcasts.
int64_t batch_stride(const TensorRef& t, int d, int rank) {
  const int i = d - (rank - t.rank());
  return i < 0 || t.shape[i] == 1 ? 0 : t.strides[i];
}

// The largest power of two, up to 256, dividing every value.
int64_t alignment(uint64_t bits) {
  if (bits == 0) return 256;
  return std::min<int64_t>(256, int64_t(bits & (~bits + 1)));
}

}  // namespace

bool gemm_layout_ok(const TensorRef& t) { return stored(t).has_value(); }

GemmPlan plan_gemm(const TensorRef& a, const TensorRef& b, const TensorRef& c, bool transpose_a,
                   bool transpose_b) {
  const int rank = c.rank();
  const Stored sa = stored(a, "a"), sb = stored(b, "b"), sc = stored(c, "out");
  KILN_CHECK(!sc.transposed, "matmul on CUDA: the output must be row-major");
  // A column-major operand is the transpose of a row-major one.
  transpose_a = transpose_a != sa.transposed;
  transpose_b = transpose_b != sb.transposed;
  GemmPlan plan;
  GemmProblem& p = plan.problem;
  p.dtype = p.out_dtype = c.dtype;
  p.m = c.shape[rank - 1];
  p.n = c.shape[rank - 2];
  p.k = transpose_a ? sa.rows : sa.cols;
  p.transpose_first = transpose_b;
  p.transpose_second = transpose_a;
  p.first = {sb.cols, sb.rows, sb.ld};
  p.second = {sa.cols, sa.rows, sa.ld};
  p.out = {sc.cols, sc.rows, sc.ld};

  // Batch dims of more than one matrix, outermost first, with each
  // operand's stride: {size, a, b, c}.
  std::vector<std::array<int64_t, 4>> dims;
  for (int d = 0; d < rank - 2; ++d)
    if (c.shape[d] > 1)
      dims.push_back({c.shape[d], batch_stride(a, d, rank), batch_stride(b, d, rank), c.strides[d]});

  // The innermost dims one stride steps through: cuBLASLt's batch.
  std::array<int64_t, 3> step{0, 0, 0};
  if (!dims.empty()) {
    step = {dims.back()[1], dims.back()[2], dims.back()[3]};
    p.batch = dims.back()[0];
    dims.pop_back();
    while (!dims.empty()) {
      const auto& d = dims.back();
      bool merges = true;
      for (int k = 0; k < 3; ++k) merges = merges && d[size_t(k) + 1] == step[size_t(k)] * p.batch;
      if (!merges) break;
      p.batch *= d[0];
      dims.pop_back();
    }
  }
  // A weight shared by the whole batch of untransposed rows of a: the
  // batch is more rows of one product (one larger GEMM).
  if (p.batch > 1 && step[1] == 0 && !transpose_a && step[0] == p.n * sa.ld &&
      step[2] == p.n * sc.ld) {
    p.n *= p.batch;
    p.second.cols *= p.batch;
    p.out.cols *= p.batch;
    p.batch = 1;
  }
  if (p.batch > 1) {
    p.second.batch_stride = step[0];
    p.first.batch_stride = step[1];
    p.out.batch_stride = step[2];
  }
  KILN_CHECK(p.batch <= INT32_MAX, "matmul on CUDA: ", p.batch, " matrices in one batch");

  // The looped dims, outermost first: every combination of their indices.
  plan.launches.push_back({});
  for (const auto& d : dims) {
    std::vector<GemmLaunch> next;
    for (const GemmLaunch& l : plan.launches)
      for (int64_t i = 0; i < d[0]; ++i) next.push_back({l.a + i * d[1], l.b + i * d[2], l.c + i * d[3]});
    plan.launches = std::move(next);
  }

  const uint64_t size = itemsize(c.dtype);
  uint64_t bits_a = p.batch > 1 ? uint64_t(p.second.batch_stride) * size : 0;
  uint64_t bits_b = p.batch > 1 ? uint64_t(p.first.batch_stride) * size : 0;
  uint64_t bits_c = p.batch > 1 ? uint64_t(p.out.batch_stride) * size : 0;
  for (const GemmLaunch& l : plan.launches) {
    bits_a |= reinterpret_cast<uintptr_t>(a.data) + uint64_t(l.a) * size;
    bits_b |= reinterpret_cast<uintptr_t>(b.data) + uint64_t(l.b) * size;
    bits_c |= reinterpret_cast<uintptr_t>(c.data) + uint64_t(l.c) * size;
  }
  p.second.align = alignment(bits_a);
  p.first.align = alignment(bits_b);
  p.out.align = alignment(bits_c);
  return plan;
}

GemmProblem plan_dense_gemm(const DenseGemm& g) {
  GemmProblem p;
  p.dtype = g.in;
  p.out_dtype = g.out;
  p.m = g.n;
  p.n = g.m;
  p.k = g.k;
  p.transpose_first = g.transpose_b;
  p.transpose_second = g.transpose_a;
  p.first = g.transpose_b ? GemmMatrix{g.k, g.n, g.ldb} : GemmMatrix{g.n, g.k, g.ldb};
  p.second = g.transpose_a ? GemmMatrix{g.m, g.k, g.lda} : GemmMatrix{g.k, g.m, g.lda};
  p.out = {g.n, g.m, g.ldc};
  p.first.align = alignment(reinterpret_cast<uintptr_t>(g.b));
  p.second.align = alignment(reinterpret_cast<uintptr_t>(g.a));
  p.out.align = alignment(reinterpret_cast<uintptr_t>(g.c));
  return p;
}

}  // namespace kiln::cuda
