// matmul on CUDA (cuBLASLt) against the CPU's, for every floating dtype,
// every transpose case, batches and broadcasts (label cuda; "skipped"
// without a GPU). Results agree within a tolerance per dtype, a repeated
// product gives the same bits, and strided operands (transposed views,
// expanded or strided matrices) give the same products.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "kiln/ops/matmul.h"
#include "kiln/runtime/tensor.h"
#include "tests/backend/cuda/against_cpu.h"
#include "tests/support/gradcheck.h"

namespace kiln {
namespace {

using test::kCuda0;

const DType kDtypes[] = {DType::f32, DType::bf16, DType::f16, DType::f64};

void expect_matches_cpu(const Shape& a_shape, const Shape& b_shape, bool ta, bool tb, DType t,
                        uint64_t seed) {
  Tensor a = test::random_tensor(a_shape, t, seed), b = test::random_tensor(b_shape, t, seed + 1);
  std::vector<double> cpu = matmul(a, b, ta, tb).to_vector<double>();
  Tensor on_gpu = matmul(a.to(kCuda0), b.to(kCuda0), ta, tb);
  EXPECT_EQ(on_gpu.device(), kCuda0);
  std::vector<double> gpu = on_gpu.to_vector<double>();
  ASSERT_EQ(gpu.size(), cpu.size());
  test::Tolerance tol = test::cuda_tolerance(t);
  for (size_t i = 0; i < cpu.size(); ++i)
    ASSERT_LE(std::abs(gpu[i] - cpu[i]), tol.atol + tol.rtol * std::abs(cpu[i]))
        << dtype_name(t) << " " << to_string(a_shape) << (ta ? "^T" : "") << " @ "
        << to_string(b_shape) << (tb ? "^T" : "") << " at " << i << ": cuda " << gpu[i]
        << ", cpu " << cpu[i];
}

TEST(CudaMatmul, EveryTransposeCaseAndDtypeMatchesTheCpu) {
  for (DType t : kDtypes)
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        // M=37, K=29, N=41: odd sizes, no tile divides them.
        Shape a = ta ? Shape{29, 37} : Shape{37, 29};
        Shape b = tb ? Shape{41, 29} : Shape{29, 41};
        expect_matches_cpu(a, b, ta, tb, t, 10);
      }
}

TEST(CudaMatmul, LargerSquareProducts) {
  for (DType t : kDtypes) expect_matches_cpu({256, 320}, {320, 192}, false, true, t, 20);
}

TEST(CudaMatmul, BatchedAndBroadcast) {
  for (DType t : kDtypes) {
    expect_matches_cpu({3, 8, 16}, {3, 16, 5}, false, false, t, 30);      // strided batch
    expect_matches_cpu({3, 8, 16}, {5, 16}, false, true, t, 31);          // shared weight (folded)
    expect_matches_cpu({16, 8}, {4, 16, 5}, true, false, t, 32);          // a broadcast
    expect_matches_cpu({2, 1, 8, 16}, {1, 3, 16, 5}, false, false, t, 33);  // mixed: looped
    expect_matches_cpu({2, 3, 16, 8}, {2, 3, 5, 16}, true, true, t, 34);    // batch of 6, both T
  }
}

TEST(CudaMatmul, EmptyInnerDimensionGivesZeros) {
  Tensor a = from_vector(std::vector<float>{}, {3, 0}, kCuda0);
  Tensor b = from_vector(std::vector<float>{}, {0, 4}, kCuda0);
  EXPECT_EQ(matmul(a, b).to_vector<float>(), std::vector<float>(12, 0.0f));
}

TEST(CudaMatmul, RepeatedProductsAreBitIdentical) {
  for (DType t : {DType::bf16, DType::f32}) {
    Tensor a = test::random_tensor({512, 1024}, t, 40).to(kCuda0);
    Tensor b = test::random_tensor({768, 1024}, t, 41).to(kCuda0);
    std::vector<float> first = matmul(a, b, false, true).to_vector<float>();
    for (int run = 0; run < 3; ++run)
      EXPECT_EQ(matmul(a, b, false, true).to_vector<float>(), first) << dtype_name(t) << " run " << run;
  }
}

TEST(CudaMatmul, StridedOperands) {
  Tensor a = test::random_tensor({16, 8}, DType::f32, 50), b = test::random_tensor({16, 4}, DType::f32, 51);
  Tensor row = test::random_tensor({1, 16}, DType::f32, 52), wide = test::random_tensor({8, 32}, DType::f32, 53);
  Tensor ga = a.to(kCuda0), gb = b.to(kCuda0), grow = row.to(kCuda0), gwide = wide.to(kCuda0);
  auto expect_near = [](const Tensor& gpu, const Tensor& cpu) {
    std::vector<double> g = gpu.to_vector<double>(), c = cpu.to_vector<double>();
    ASSERT_EQ(g.size(), c.size());
    for (size_t i = 0; i < c.size(); ++i) EXPECT_NEAR(g[i], c[i], 1e-5 + 1e-5 * std::abs(c[i])) << i;
  };
  expect_near(matmul(ga.t(), gb), matmul(a.t(), b));                        // transposed view, in place
  expect_near(matmul(gb.t(), ga, false, false), matmul(b.t(), a));          // and as the second operand
  expect_near(matmul(ga.t(), ga.t(), true, false), matmul(a.t(), a.t(), true, false));  // view and flag cancel
  expect_near(matmul(grow.expand({8, 16}), gb), matmul(row.expand({8, 16}), b));  // copied first
  expect_near(matmul(gwide.slice(1, 0, 32, 2), gb), matmul(wide.slice(1, 0, 32, 2), b));  // copied first
}

}  // namespace
}  // namespace kiln
