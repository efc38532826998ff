#include "kiln/backend/cpu/vmath.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace kiln::cpu {
namespace {

// Distance from the correctly rounded result, in units of its last place.
double ulp_error(float got, double exact) {
  float rounded = static_cast<float>(exact);
  double ulp = std::nextafter(rounded, std::numeric_limits<float>::infinity()) - rounded;
  return std::abs(double(got) - exact) / ulp;
}

TEST(VMath, ExpF32IsWithinOneUlpOverTheNormalRange) {
  double worst = 0;
  for (float x = -87.0f; x < 88.5f; x += 0.00731f)
    worst = std::max(worst, ulp_error(exp_f32(x), std::exp(double(x))));
  EXPECT_LT(worst, 1.0);
}

TEST(VMath, ExpF32SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(exp_f32(0.0f), 1.0f);
  EXPECT_EQ(exp_f32(-0.0f), 1.0f);
  EXPECT_EQ(exp_f32(inf), inf);
  EXPECT_EQ(exp_f32(-inf), 0.0f);
  EXPECT_EQ(exp_f32(89.0f), inf);     // overflows
  EXPECT_EQ(exp_f32(-110.0f), 0.0f);  // underflows
  EXPECT_TRUE(std::isnan(exp_f32(std::numeric_limits<float>::quiet_NaN())));
  // Gradual underflow: subnormal results keep their magnitude.
  EXPECT_NEAR(exp_f32(-95.0f) / std::exp(-95.0), 1.0, 1e-4);
}

}  // namespace
}  // namespace kiln::cpu
