// The host's f32 math (kiln/codegen/vmath.h) against double-precision
// references: the stated ulp bounds over a dense sample of all 2^32 floats
// (every float with KILN_VMATH_EVERY_FLOAT=1, a few minutes), and the IEEE
// special values exactly.
#include "kiln/codegen/vmath.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <vector>

#include "kiln/codegen/elementwise_ops.h"

namespace kiln::codegen::vmath {
namespace {

const float inf = std::numeric_limits<float>::infinity();
const float nan = std::numeric_limits<float>::quiet_NaN();

// Distance from the exact value in units of the float spacing at it
// (subnormal spacing below 2^-126); 0 where the result is the exact value
// rounded (inf where that overflows, zeros), inf for a wrong inf or NaN.
double ulp_error(float got, double exact) {
  if (std::isnan(exact)) return std::isnan(got) ? 0 : inf;
  if (got == static_cast<float>(exact) && std::signbit(got) == std::signbit(exact)) return 0;
  if (!std::isfinite(got)) return inf;
  int e = exact == 0 ? -126 : std::max(std::ilogb(exact), -126);
  return std::abs(double(got) - exact) / std::ldexp(1.0, e - 23);
}

float sigmoid_f32(float x) { return Sigmoid{}(x); }
double exp_exact(double x) { return std::exp(x); }
double log_exact(double x) { return std::log(x); }
double tanh_exact(double x) { return std::tanh(x); }
double erf_exact(double x) { return std::erf(x); }
// 1 / (1 + exp(-x)) flushes to 0 once exp(-x) overflows, for x below
// -log(FLT_MAX), where the exact result is still subnormal (as PyTorch's CPU
// sigmoid does); compared with 0 there.
double sigmoid_exact(double x) {
  return x < -std::log(double(std::numeric_limits<float>::max())) ? 0 : 1 / (1 + std::exp(-x));
}

struct Fn {
  float (*f32)(float);
  double (*exact)(double);
};
const Fn fns[] = {{exp_f32, exp_exact},
                  {log_f32, log_exact},
                  {tanh_f32, tanh_exact},
                  {erf_f32, erf_exact},
                  {sigmoid_f32, sigmoid_exact}};

// The worst error over the floats with bit patterns 0, stride, 2 stride, ...
// (an odd stride reaches every exponent and sign), and the input giving it.
// F is a template argument so that the loop calling it inlines and vectorises.
template <float (*F)(float), double (*Exact)(double)>
std::pair<double, float> worst_error(uint64_t stride) {
  constexpr int kBatch = 4096;
  constexpr uint64_t kAll = uint64_t(1) << 32;
  std::vector<float> x(kBatch), y(kBatch);
  double worst = 0;
  float at = 0;
  for (uint64_t b = 0; b < kAll; b += stride * kBatch) {
    int n = 0;
    for (uint64_t u = b; n < kBatch && u < kAll; u += stride) x[n++] = float_of(int32_t(uint32_t(u)));
    for (int i = 0; i < n; ++i) y[i] = F(x[i]);
    for (int i = 0; i < n; ++i) {
      double err = ulp_error(y[i], Exact(double(x[i])));
      if (err > worst) worst = err, at = x[i];
    }
  }
  return {worst, at};
}

template <float (*F)(float), double (*Exact)(double)>
void expect_bound(double bound) {
  const uint64_t stride = std::getenv("KILN_VMATH_EVERY_FLOAT") ? 1 : 193;
  auto [worst, at] = worst_error<F, Exact>(stride);
  EXPECT_LE(worst, bound) << "at x = " << at;
  std::printf("worst error %.3f ulp at x = %a\n", worst, at);
}

TEST(VMath, ExpIsWithinOnePointZeroFiveUlp) { expect_bound<exp_f32, exp_exact>(1.05); }
TEST(VMath, LogIsWithinOneUlp) { expect_bound<log_f32, log_exact>(1.0); }
TEST(VMath, TanhIsWithinOneAndAHalfUlp) { expect_bound<tanh_f32, tanh_exact>(1.5); }
TEST(VMath, ErfIsWithinOneAndAHalfUlp) { expect_bound<erf_f32, erf_exact>(1.5); }
// exp's error, then 1 + e's and the division's roundings.
TEST(VMath, SigmoidIsWithinTwoAndAHalfUlp) { expect_bound<sigmoid_f32, sigmoid_exact>(2.5); }

// Exact results at the special values and the range ends.
TEST(VMath, SpecialValues) {
  const float tiny = std::numeric_limits<float>::denorm_min();
  const float max = std::numeric_limits<float>::max();
  for (float x : {0.0f, -0.0f, inf, -inf, nan, -nan, tiny, -tiny, 1e-40f, max, -max,
                  0x1p-126f, 88.8f, -88.8f, 89.0f, -103.0f, -104.0f, -105.0f, 1e30f, -1e30f})
    for (const Fn& fn : fns) EXPECT_LE(ulp_error(fn.f32(x), fn.exact(x)), 2.5) << x;
  EXPECT_EQ(exp_f32(-0.0f), 1.0f);
  EXPECT_EQ(exp_f32(-inf), 0.0f);
  EXPECT_EQ(exp_f32(89.0f), inf);     // overflows
  EXPECT_EQ(exp_f32(-110.0f), 0.0f);  // underflows
  EXPECT_NEAR(exp_f32(-95.0f) / std::exp(-95.0), 1.0, 1e-4);  // gradual underflow
  EXPECT_EQ(log_f32(1.0f), 0.0f);
  EXPECT_EQ(log_f32(0.0f), -inf);
  EXPECT_EQ(log_f32(-0.0f), -inf);
  EXPECT_EQ(log_f32(inf), inf);
  EXPECT_TRUE(std::isnan(log_f32(-1.0f)));
  EXPECT_TRUE(std::isnan(log_f32(-inf)));
  EXPECT_TRUE(std::signbit(tanh_f32(-0.0f)) && tanh_f32(-0.0f) == 0);
  EXPECT_EQ(tanh_f32(inf), 1.0f);
  EXPECT_EQ(tanh_f32(-inf), -1.0f);
  EXPECT_TRUE(std::signbit(erf_f32(-0.0f)) && erf_f32(-0.0f) == 0);
  EXPECT_EQ(erf_f32(inf), 1.0f);
  EXPECT_EQ(erf_f32(-inf), -1.0f);
  EXPECT_EQ(sigmoid_f32(-inf), 0.0f);
  EXPECT_EQ(sigmoid_f32(inf), 1.0f);
  for (const Fn& fn : fns) EXPECT_TRUE(std::isnan(fn.f32(nan)));
}

}  // namespace
}  // namespace kiln::codegen::vmath
