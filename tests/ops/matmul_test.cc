#include "kiln/ops/matmul.h"

#include <gtest/gtest.h>

#include "kiln/backend/cpu/matmul_path.h"
#include "kiln/base/error.h"
#include "kiln/ir/op.h"
#include "kiln/runtime/threads.h"
#include "tests/support/gradcheck.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

using test::all_close;
using test::error_of;
using test::random_tensor;

struct Case {
  Shape a, b;  // as stored, before the transpose flags
  bool ta = false, tb = false;
};

std::ostream& operator<<(std::ostream& os, const Case& c) {
  return os << c.a << (c.ta ? "^T" : "") << " @ " << c.b << (c.tb ? "^T" : "");
}

// A naive triple loop over row-major host copies, in double. Batch dims are
// right-aligned; a size-1 batch dim repeats.
std::vector<double> reference(const Case& c, const std::vector<double>& a,
                              const std::vector<double>& b) {
  int ra = c.a.size(), rb = c.b.size();
  int64_t a_rows = c.a[ra - 2], a_cols = c.a[ra - 1], b_rows = c.b[rb - 2], b_cols = c.b[rb - 1];
  int64_t m = c.ta ? a_cols : a_rows, k = c.ta ? a_rows : a_cols, n = c.tb ? b_rows : b_cols;
  int nb = std::max(ra, rb) - 2;
  std::vector<int64_t> batch(nb), a_batch(nb, 1), b_batch(nb, 1);
  for (int d = 0; d < nb; ++d) {
    int da = d - (nb - (ra - 2)), db = d - (nb - (rb - 2));
    if (da >= 0) a_batch[d] = c.a[da];
    if (db >= 0) b_batch[d] = c.b[db];
    batch[d] = std::max(a_batch[d], b_batch[d]);
  }
  int64_t batches = 1;
  for (int64_t x : batch) batches *= x;
  std::vector<double> out;
  for (int64_t t = 0; t < batches; ++t) {
    // Flat batch index of each operand for output batch t.
    int64_t ai = 0, bi = 0, rest = t, a_scale = 1, b_scale = 1;
    for (int d = nb - 1; d >= 0; --d) {
      int64_t idx = rest % batch[d];
      rest /= batch[d];
      ai += (a_batch[d] == 1 ? 0 : idx) * a_scale;
      bi += (b_batch[d] == 1 ? 0 : idx) * b_scale;
      a_scale *= a_batch[d];
      b_scale *= b_batch[d];
    }
    const double* A = a.data() + ai * a_rows * a_cols;
    const double* B = b.data() + bi * b_rows * b_cols;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p)
          s += (c.ta ? A[p * a_cols + i] : A[i * a_cols + p]) *
               (c.tb ? B[j * b_cols + p] : B[p * b_cols + j]);
        out.push_back(s);
      }
  }
  return out;
}

// Checks matmul against the reference on inputs already rounded to `dtype`.
void check_forward(const Case& c, DType dtype, double rtol, double atol) {
  SCOPED_TRACE(::testing::Message() << c << " " << dtype_name(dtype));
  Tensor a = random_tensor(c.a, dtype, 1), b = random_tensor(c.b, dtype, 2);
  Tensor out = matmul(a, b, c.ta, c.tb);
  EXPECT_EQ(out.dtype(), dtype);
  EXPECT_TRUE(all_close(out.to_vector<double>(),
                        reference(c, a.to_vector<double>(), b.to_vector<double>()), rtol, atol));
}

const std::vector<Case> kCases = {
    {{1, 1}, {1, 1}},
    {{3, 5}, {5, 7}},
    {{1, 9}, {9, 1}},
    {{9, 1}, {1, 9}},
    {{17, 33}, {33, 65}},
    {{130, 257}, {257, 67}},
    {{64, 64}, {64, 64}},
    {{2, 3, 4}, {2, 4, 5}},
    {{2, 3, 4}, {4, 5}},
    {{3, 4}, {2, 4, 5}},
    {{2, 1, 5, 3}, {4, 3, 6}},
    {{1, 4, 5, 3}, {3, 1, 3, 6}},
    {{2, 1, 1, 7, 3}, {1, 3, 1, 3, 2}},
};

// `c` (untransposed) with its operands stored transposed where a flag is
// set, so the flags swap them back to the same product.
Case with_flags(Case c, bool ta, bool tb) {
  int ra = c.a.size(), rb = c.b.size();
  if (ta) std::swap(c.a[ra - 1], c.a[ra - 2]);
  if (tb) std::swap(c.b[rb - 1], c.b[rb - 2]);
  c.ta = ta, c.tb = tb;
  return c;
}

class MatmulForward : public ::testing::TestWithParam<std::pair<bool, bool>> {};

TEST_P(MatmulForward, MatchesNaiveLoopF32) {
  auto [ta, tb] = GetParam();
  for (const Case& c : kCases) {
    check_forward(with_flags(c, ta, tb), DType::f32, 1e-5, 1e-5);
  }
}

TEST_P(MatmulForward, MatchesNaiveLoopF64) {
  auto [ta, tb] = GetParam();
  for (const Case& c : kCases) {
    check_forward(with_flags(c, ta, tb), DType::f64, 1e-12, 1e-12);
  }
}

// bf16 and f16 accumulate in f32, so the error is the final rounding to the
// output type (at most 2^-8 relative for bf16, 2^-11 for f16) plus f32 round-off;
// the tolerances allow two units.
// bf16 runs both of its paths: oneDNN's bf16 primitive (native or emulated)
// and the operands widened to f32 (cpu/matmul_path.h).
TEST_P(MatmulForward, HalfPrecisionAccumulatesInF32) {
  auto [ta, tb] = GetParam();
  for (cpu::MatmulPath path : {cpu::MatmulPath::onednn, cpu::MatmulPath::widened_to_f32}) {
    SCOPED_TRACE(path == cpu::MatmulPath::onednn ? "bf16 by oneDNN" : "bf16 widened to f32");
    cpu::set_bf16_matmul_path(path);
    for (const Case& c : {Case{{33, 130}, {130, 17}}, Case{{2, 64, 257}, {257, 48}},
                          Case{{1, 3, 5, 1000}, {2, 1, 1000, 7}}}) {
      check_forward(with_flags(c, ta, tb), DType::bf16, 8e-3, 1e-4);
      check_forward(with_flags(c, ta, tb), DType::f16, 1e-3, 1e-4);
    }
  }
  cpu::set_bf16_matmul_path(std::nullopt);
}

// Widening is exact, so the widened bf16 product is the f32 product of the
// same values rounded to bf16 once, bit for bit, transposed views included.
TEST(Matmul, WidenedBf16IsTheRoundedF32Product) {
  cpu::set_bf16_matmul_path(cpu::MatmulPath::widened_to_f32);
  Tensor a = random_tensor({3, 40, 70}, DType::bf16, 3), b = random_tensor({50, 70}, DType::bf16, 4);
  Tensor got = matmul(a, b, false, true);
  Tensor want = matmul(a.to(DType::f32), b.to(DType::f32), false, true).to(DType::bf16);
  cpu::set_bf16_matmul_path(std::nullopt);
  EXPECT_EQ(got.to_vector<double>(), want.to_vector<double>());
}

INSTANTIATE_TEST_SUITE_P(Transposes, MatmulForward,
                         ::testing::Values(std::pair{false, false}, std::pair{false, true},
                                           std::pair{true, false}, std::pair{true, true}));

TEST(Matmul, HandExample) {
  Tensor a = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = from_vector<float>({7, 8, 9, 10, 11, 12}, {3, 2});
  EXPECT_EQ(matmul(a, b).to_vector<float>(), (std::vector<float>{58, 64, 139, 154}));
  // a^T is [3,2], b^T is [2,3].
  EXPECT_EQ(matmul(a, b, true, true).to_vector<float>(),
            (std::vector<float>{39, 49, 59, 54, 68, 82, 69, 87, 105}));
}

TEST(Matmul, TransposedViewEqualsFlag) {
  Tensor a = random_tensor({37, 19}, DType::f32, 3), b = random_tensor({23, 19}, DType::f32, 4);
  EXPECT_TRUE(all_close(matmul(a, b.t()), matmul(a, b, false, true), 0, 0));
}

TEST(Matmul, EmptyInnerDimGivesZeros) {
  for (DType t : {DType::f32, DType::f64}) {
    Tensor out = matmul(zeros({3, 0}, t), zeros({0, 4}, t));
    EXPECT_EQ(out.shape(), (Shape{3, 4}));
    EXPECT_EQ(out.to_vector<double>(), std::vector<double>(12, 0.0));
  }
  EXPECT_EQ(matmul(zeros({2, 0, 3}), zeros({3, 4})).shape(), (Shape{2, 0, 4}));
}

// Every dtype's path, transposed and batch-broadcast operands, and shapes
// whose k is long next to their output (a weight gradient's), which
// oneDNN's own threading splits across threads on AVX2 CPUs and the f32
// kernel cuts into row blocks smaller than its usual 512.
TEST(Matmul, SameResultForEveryThreadCount) {
  struct Product {
    Shape a, b;
    bool ta, tb;
  };
  const std::vector<Product> products = {{{2, 96, 80}, {80, 72}, false, false},
                                         {{128, 64}, {128, 64}, true, false},
                                         {{256, 4096}, {256, 4096}, false, true},
                                         {{3, 1, 40, 520}, {2, 700, 520}, false, true},
                                         {{600, 300}, {300, 1100}, false, false},
                                         {{512, 256}, {512, 384}, true, false}};
  const int saved = num_threads();
  for (DType dtype : {DType::f64, DType::f32, DType::bf16}) {
    for (const Product& p : products) {
      Tensor a = random_tensor(p.a, dtype, 5), b = random_tensor(p.b, dtype, 6);
      set_num_threads(1);
      const std::vector<double> one = matmul(a, b, p.ta, p.tb).to_vector<double>();
      for (int threads : {2, 3, 4}) {
        set_num_threads(threads);
        EXPECT_EQ(matmul(a, b, p.ta, p.tb).to_vector<double>(), one)
            << dtype_name(dtype) << " " << p.a << " x " << p.b << " on " << threads << " threads";
      }
    }
  }
  set_num_threads(saved);
}

TEST(Matmul, CostCountsTwoFlopsPerMultiplyAdd) {
  const ir::OpDef& op = ir::get_op("matmul");
  ir::Attrs attrs = op.complete_attrs({{"transpose_a", true}});
  std::vector<ir::TypeInfo> in = {{DType::f32, {3, 7, 5}}, {DType::f32, {2, 1, 7, 4}}};
  auto out = op.infer_types(in, attrs);
  ASSERT_EQ(out[0].shape, (Shape{2, 3, 5, 4}));
  EXPECT_DOUBLE_EQ(op.cost_of(in, out, attrs).flops, 2.0 * 5 * 4 * 7 * 6);
}

TEST(MatmulGrad, AllTransposesAndBroadcasts) {
  const std::vector<Case> cases = {
      {{3, 4}, {4, 5}},
      {{4, 3}, {4, 5}, true, false},
      {{3, 4}, {5, 4}, false, true},
      {{4, 3}, {5, 4}, true, true},
      // Batched activations against a rank-2 weight, in every layout.
      {{2, 3, 4}, {4, 5}},
      {{2, 2, 3, 4}, {5, 4}, false, true},
      {{2, 4, 3}, {4, 5}, true, false},
      {{2, 4, 3}, {5, 4}, true, true},
      // Batch broadcasting both ways and size-1 dims.
      {{3, 4}, {2, 5, 4}, false, true},
      {{2, 1, 4, 3}, {3, 4, 2}, true, false},
      {{1, 1}, {1, 3}},
      {{1, 3, 1}, {2, 1, 3}, true, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << c);
    Tensor a = random_tensor(c.a, DType::f64, 7), b = random_tensor(c.b, DType::f64, 8);
    EXPECT_TRUE(test::check_gradients(
        [&](const std::vector<Tensor>& x) { return matmul(x[0], x[1], c.ta, c.tb); }, {a, b}));
  }
}

TEST(MatmulErrors, InnerDimMismatchNamesShapes) {
  std::string msg = error_of([] { matmul(zeros({2, 3}), zeros({4, 5})); });
  EXPECT_NE(msg.find("inner dimensions"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[2,3]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[4,5]"), std::string::npos) << msg;
  msg = error_of([] { matmul(zeros({2, 3}), zeros({4, 3}), true, true); });
  EXPECT_NE(msg.find("[2,3]^T @ f32[4,3]^T"), std::string::npos) << msg;
}

TEST(MatmulErrors, RankOneAndBadBatchAndDtypes) {
  EXPECT_NE(error_of([] {
              matmul(zeros({3}), zeros({3, 2}));
            }).find("rank >= 2"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              matmul(zeros({2, 2, 3}), zeros({3, 3, 2}));
            }).find("[2]"),
            std::string::npos);
  std::string msg = error_of([] { matmul(zeros({2, 3}), zeros({3, 2}, DType::bf16)); });
  EXPECT_NE(msg.find("dtypes differ"), std::string::npos) << msg;
  msg = error_of([] { matmul(zeros({2, 3}, DType::i32), zeros({3, 2}, DType::i32)); });
  EXPECT_NE(msg.find("not supported"), std::string::npos) << msg;
}

}  // namespace
}  // namespace kiln
