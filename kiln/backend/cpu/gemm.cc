#include "kiln/backend/cpu/gemm.h"

#include <dnnl.h>

#include <algorithm>
#include <array>
#include <bit>
#include <dnnl.hpp>
#include <map>
#include <vector>

#include "kiln/backend/cpu/matmul_path.h"
#include "kiln/backend/cpu/onednn.h"
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

// op(X) ([rows, cols]) of a row-major X with row stride ld.
dnnl::memory::desc operand_desc(int64_t rows, int64_t cols, bool transposed, int64_t ld,
                                dnnl::memory::data_type type) {
  using dims = dnnl::memory::dims;
  return dnnl::memory::desc(dims{rows, cols}, type, transposed ? dims{1, ld} : dims{ld, 1});
}

// A 16-bit product as a oneDNN matmul (16-bit source and weights, f32
// destination), prepared once per layout, alpha and beta by each thread (no
// lock on a path that runs per block), made and run on one thread, with the
// thread's memory objects for it.
struct Product16 {
  PreparedMatmul prepared;
  MatmulBuffers buffers;
};

Product16& product16(const GemmArgs& g, DType type, float alpha, float beta) {
  // Never destroyed: a device queue may still run kernels at exit.
  using Key = std::array<int64_t, 11>;
  thread_local auto* cache = new std::map<Key, Product16>;
  const Key key{int64_t(type), g.ta, g.tb, g.m, g.n, g.k, g.lda, g.ldb, g.ldc,
                std::bit_cast<int32_t>(alpha), beta != 0};
  if (auto it = cache->find(key); it != cache->end()) return it->second;
  const auto t = *onednn_type(type);
  dnnl::primitive_attr attr;
  if (alpha != 1) attr.set_output_scales(0, {alpha});
  if (beta != 0) {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    attr.set_post_ops(ops);
  }
  PreparedMatmul p = prepare_matmul(
      operand_desc(g.m, g.k, g.ta, g.lda, t), operand_desc(g.k, g.n, g.tb, g.ldb, t),
      operand_desc(g.m, g.n, false, g.ldc, dnnl::memory::data_type::f32), attr,
      cat("gemm: a ", dtype_name(type), " product of [", g.m, ",", g.k, "] x [", g.k, ",", g.n,
          "]"));
  MatmulBuffers buffers = p.primitive ? matmul_buffers(p) : MatmulBuffers{};
  if (cache->size() >= 4096) cache->clear();  // bounds memory when shapes keep changing
  return cache->emplace(key, Product16{std::move(p), std::move(buffers)}).first->second;
}

// A row-major rows x cols matrix of row stride ld, widened into `out` (dense).
template <class T>
const float* widened(const T* x, int64_t rows, int64_t cols, int64_t ld, std::vector<float>& out) {
  out.resize(size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[size_t(r * cols + c)] = float(x[r * ld + c]);
  return out.data();
}

template <class T>
void gemm16(const GemmArgs& g, float alpha, const T* a, const T* b, float beta, float* c) {
  KILN_CHECK(beta == 0 || beta == 1, "gemm: a 16-bit product takes beta 0 or 1, not ", beta);
  if (g.m == 0 || g.n == 0) return;
  if (g.k == 0) return scale_only(g, beta, c);
  constexpr DType type = dtype_of<T>::value;
  if (matmul_path(type) == MatmulPath::onednn) {
    bool done = false;
    on_one_thread([&] {
      Product16& p = product16(g, type, alpha, beta);
      if (!p.prepared.primitive) return;
      run_matmul(p.prepared, p.buffers, a, b, c);
      done = true;
    });
    if (done) return;
  }
  thread_local std::vector<float> wa, wb;
  GemmArgs w = g;
  w.lda = g.ta ? g.m : g.k;
  w.ldb = g.tb ? g.k : g.n;
  gemm(w, alpha, widened(a, g.ta ? g.k : g.m, w.lda, g.lda, wa),
       widened(b, g.tb ? g.n : g.k, w.ldb, g.ldb, wb), beta, c);
}

}  // namespace

void gemm(const GemmArgs& g, float alpha, const float* a, const float* b, float beta, float* c) {
  if (g.m == 0 || g.n == 0) return;
  if (g.k == 0) return scale_only(g, beta, c);
  dnnl_status_t st;
  on_one_thread([&] {
    st = dnnl_sgemm(g.ta ? 'T' : 'N', g.tb ? 'T' : 'N', g.m, g.n, g.k, alpha, a, g.lda, b, g.ldb,
                    beta, c, g.ldc);
  });
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

void gemm(const GemmArgs& g, float alpha, const bf16* a, const bf16* b, float beta, float* c) {
  gemm16(g, alpha, a, b, beta, c);
}

void gemm(const GemmArgs& g, float alpha, const f16* a, const f16* b, float beta, float* c) {
  gemm16(g, alpha, a, b, beta, c);
}

template <class T, class C>
void parallel_gemm(const GemmArgs& g, C alpha, const T* a, const T* b, C beta, C* c, int64_t rows,
                   int64_t cols) {
  int64_t row_blocks = (g.m + rows - 1) / rows, col_blocks = (g.n + cols - 1) / cols;
  parallel_for(row_blocks * col_blocks, rows * cols * g.k, [&](int64_t begin, int64_t end) {
    for (int64_t blk = begin; blk < end; ++blk) {
      int64_t r0 = blk / col_blocks * rows, c0 = blk % col_blocks * cols;
      GemmArgs part = g;
      part.m = std::min(rows, g.m - r0);
      part.n = std::min(cols, g.n - c0);
      const T* ap = g.ta ? a + r0 : a + r0 * g.lda;
      const T* bp = g.tb ? b + c0 * g.ldb : b + c0;
      gemm(part, alpha, ap, bp, beta, c + r0 * g.ldc + c0);
    }
  });
}

template void parallel_gemm(const GemmArgs&, float, const float*, const float*, float, float*,
                            int64_t, int64_t);
template void parallel_gemm(const GemmArgs&, double, const double*, const double*, double,
                            double*, int64_t, int64_t);
template void parallel_gemm(const GemmArgs&, float, const bf16*, const bf16*, float, float*,
                            int64_t, int64_t);
template void parallel_gemm(const GemmArgs&, float, const f16*, const f16*, float, float*,
                            int64_t, int64_t);

}  // namespace kiln::cpu
