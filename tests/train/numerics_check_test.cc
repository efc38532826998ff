// The numerics-check verdicts on hand-picked f32 values.
#include "kiln/train/numerics_check.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace kiln::train {
namespace {

TEST(NumericsCheck, UlpsBetweenNeighbouringFloats) {
  float x = 1.5f;
  EXPECT_EQ(ulps_apart(x, x), 0);
  EXPECT_EQ(ulps_apart(x, std::nextafter(x, 2.0f)), 1);
  EXPECT_EQ(ulps_apart(std::nextafter(x, 2.0f), x), 1);
  // Across zero: the smallest denormals either side are 2 apart (+0 and -0 coincide).
  float tiny = std::numeric_limits<float>::denorm_min();
  EXPECT_EQ(ulps_apart(-tiny, tiny), 2);
  EXPECT_EQ(ulps_apart(-0.0f, 0.0f), 0);
}

TEST(NumericsCheck, Verdicts) {
  EXPECT_EQ(compare_f32(7.645535, 7.645535), Agreement::identical);
  // One f32 ulp of 7.6 is 4.8e-7: a rounding difference.
  EXPECT_EQ(compare_f32(7.645535, double(std::nextafter(7.645535f, 8.0f))), Agreement::last_bits);
  EXPECT_EQ(compare_f32(1.0, 1.0 + 0.9e-5), Agreement::last_bits);
  EXPECT_EQ(compare_f32(1.0, 1.0 + 2e-5), Agreement::material);
  EXPECT_EQ(compare_f32(1.0, std::nan("")), Agreement::material);
}

}  // namespace
}  // namespace kiln::train
