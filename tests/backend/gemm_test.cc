// The fused kernels' raw products (kiln/backend/cpu/gemm.h) on 16-bit
// operands, against a double-precision loop over the same values: both
// paths (oneDNN's 16-bit matmul, the operands widened to f32), every
// transpose, row strides wider than the rows, alpha and beta.
#include "kiln/backend/cpu/gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kiln/backend/cpu/matmul_path.h"
#include "kiln/base/error.h"

namespace kiln::cpu {
namespace {

// A rows x cols matrix of row stride ld (ld - cols columns of padding, NaN:
// a product that reads them shows it).
template <class T>
std::vector<T> random_matrix(int64_t rows, int64_t cols, int64_t ld, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(-2, 2);
  std::vector<T> m(size_t(rows * ld), T(std::nanf("")));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) m[size_t(r * ld + c)] = T(d(gen));
  return m;
}

struct Case {
  bool ta, tb;
  int64_t m, n, k, pad;
  float alpha, beta;
};

template <class T>
void check(const Case& c) {
  const int64_t a_rows = c.ta ? c.k : c.m, a_cols = c.ta ? c.m : c.k;
  const int64_t b_rows = c.tb ? c.n : c.k, b_cols = c.tb ? c.k : c.n;
  const GemmArgs g{c.ta, c.tb, c.m, c.n, c.k, a_cols + c.pad, b_cols + c.pad, c.n + c.pad};
  std::vector<T> a = random_matrix<T>(a_rows, a_cols, g.lda, 1),
                 b = random_matrix<T>(b_rows, b_cols, g.ldb, 2);
  std::vector<float> out = random_matrix<float>(c.m, c.n, g.ldc, 3), before = out;
  gemm(g, c.alpha, a.data(), b.data(), c.beta, out.data());
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < c.n; ++j) {
      double want = 0, size = 0;
      for (int64_t p = 0; p < c.k; ++p) {
        double x = double(float(c.ta ? a[size_t(p * g.lda + i)] : a[size_t(i * g.lda + p)]));
        double y = double(float(c.tb ? b[size_t(j * g.ldb + p)] : b[size_t(p * g.ldb + j)]));
        want += x * y;
        size += std::abs(x * y);
      }
      want = c.alpha * want + (c.beta != 0 ? double(before[size_t(i * g.ldc + j)]) : 0.0);
      // f32 accumulation over k products, each exact.
      const double tol = 1e-6 * (std::abs(c.alpha) * size + 1) * std::sqrt(double(c.k));
      ASSERT_NEAR(out[size_t(i * g.ldc + j)], want, tol) << "at " << i << "," << j;
    }
    for (int64_t j = c.n; j < g.ldc; ++j)  // the padding is left alone
      ASSERT_TRUE(std::isnan(out[size_t(i * g.ldc + j)])) << "padding at " << i << "," << j;
  }
}

TEST(Gemm, SixteenBitOperandsAccumulateInF32OnEitherPath) {
  for (MatmulPath path : {MatmulPath::onednn, MatmulPath::widened_to_f32}) {
    SCOPED_TRACE(path == MatmulPath::onednn ? "oneDNN" : "widened to f32");
    set_bf16_matmul_path(path);
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (const Case& c : {Case{ta, tb, 33, 17, 130, 0, 1, 0}, Case{ta, tb, 128, 64, 128, 8, 0.125f, 1},
                              Case{ta, tb, 5, 200, 1, 3, -2, 1}, Case{ta, tb, 64, 64, 0, 2, 1, 1}}) {
          SCOPED_TRACE(testing::Message() << "ta " << ta << " tb " << tb << " " << c.m << "x"
                                          << c.n << "x" << c.k << " alpha " << c.alpha
                                          << " beta " << c.beta);
          check<bf16>(c);
          check<f16>(c);
        }
  }
  set_bf16_matmul_path(std::nullopt);
}

TEST(Gemm, ParallelBlocksOfSixteenBitOperands) {
  // Blocks of 8 x 16 over a 50 x 70 product: edge blocks of every shape.
  const GemmArgs g{false, true, 50, 70, 40, 40, 40, 70};
  std::vector<bf16> a = random_matrix<bf16>(50, 40, 40, 4), b = random_matrix<bf16>(70, 40, 40, 5);
  std::vector<float> whole(50 * 70), blocks(50 * 70);
  gemm(g, 1.0f, a.data(), b.data(), 0.0f, whole.data());
  parallel_gemm(g, 1.0f, a.data(), b.data(), 0.0f, blocks.data(), 8, 16);
  for (size_t i = 0; i < whole.size(); ++i)
    ASSERT_NEAR(blocks[i], whole[i], 1e-4 * (1 + std::abs(whole[i]))) << "at " << i;
}

TEST(Gemm, SixteenBitOperandsTakeBetaZeroOrOne) {
  const GemmArgs g{false, false, 2, 2, 2, 2, 2, 2};
  std::vector<bf16> a(4, bf16(1.0f));
  std::vector<float> c(4);
  EXPECT_THROW(gemm(g, 1.0f, a.data(), a.data(), 0.5f, c.data()), Error);
}

}  // namespace
}  // namespace kiln::cpu
