#include "kiln/backend/cpu/gemm.h"

#include <dnnl.h>
#include <omp.h>

#include <algorithm>
#include <vector>

#include "kiln/backend/cpu/parallel.h"
#include "kiln/base/error.h"

namespace kiln::cpu {
namespace {

// C *= beta, where the product is empty.
template <class C>
void scale_only(const GemmArgs& g, C beta, C* c) {
  for (int64_t i = 0; i < g.m; ++i)
    for (int64_t j = 0; j < g.n; ++j) c[i * g.ldc + j] = beta == C(0) ? C(0) : c[i * g.ldc + j] * beta;
}

}  // namespace

void gemm(const GemmArgs& g, float alpha, const float* a, const float* b, float beta, float* c) {
  if (g.m == 0 || g.n == 0) return;
  if (g.k == 0) return scale_only(g, beta, c);
  // oneDNN sizes its split by OpenMP's team size; one thread keeps this
  // call's summation order fixed (inside a parallel region it is one anyway).
  int saved = omp_get_max_threads();
  if (saved != 1) omp_set_num_threads(1);
  dnnl_status_t st = dnnl_sgemm(g.ta ? 'T' : 'N', g.tb ? 'T' : 'N', g.m, g.n, g.k, alpha, a, g.lda,
                                b, g.ldb, beta, c, g.ldc);
  if (saved != 1) omp_set_num_threads(saved);
  KILN_CHECK(st == dnnl_success, "gemm: oneDNN sgemm failed (status ", int(st), ") for [", g.m,
             ",", g.k, "] x [", g.k, ",", g.n, "]");
}

void gemm(const GemmArgs& g, double alpha, const double* a, const double* b, double beta,
          double* c) {
  if (g.m == 0 || g.n == 0) return;
  // i-p-j order: the inner loop runs along rows of op(B) and C.
  std::vector<double> acc(size_t(g.n));
  for (int64_t i = 0; i < g.m; ++i) {
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int64_t p = 0; p < g.k; ++p) {
      double av = g.ta ? a[p * g.lda + i] : a[i * g.lda + p];
      if (g.tb)
        for (int64_t j = 0; j < g.n; ++j) acc[size_t(j)] += av * b[j * g.ldb + p];
      else
        for (int64_t j = 0; j < g.n; ++j) acc[size_t(j)] += av * b[p * g.ldb + j];
    }
    double* row = c + i * g.ldc;
    for (int64_t j = 0; j < g.n; ++j)
      row[j] = alpha * acc[size_t(j)] + (beta == 0 ? 0.0 : beta * row[j]);
  }
}

template <class C>
void parallel_gemm(const GemmArgs& g, C alpha, const C* a, const C* b, C beta, C* c, int64_t rows,
                   int64_t cols) {
  int64_t row_blocks = (g.m + rows - 1) / rows, col_blocks = (g.n + cols - 1) / cols;
  parallel_for(row_blocks * col_blocks, rows * cols * g.k, [&](int64_t begin, int64_t end) {
    for (int64_t blk = begin; blk < end; ++blk) {
      int64_t r0 = blk / col_blocks * rows, c0 = blk % col_blocks * cols;
      GemmArgs part = g;
      part.m = std::min(rows, g.m - r0);
      part.n = std::min(cols, g.n - c0);
      const C* ap = g.ta ? a + r0 : a + r0 * g.lda;
      const C* bp = g.tb ? b + c0 * g.ldb : b + c0;
      gemm(part, alpha, ap, bp, beta, c + r0 * g.ldc + c0);
    }
  });
}

template void parallel_gemm<float>(const GemmArgs&, float, const float*, const float*, float,
                                   float*, int64_t, int64_t);
template void parallel_gemm<double>(const GemmArgs&, double, const double*, const double*, double,
                                    double*, int64_t, int64_t);

}  // namespace kiln::cpu
