// Tensor::to_string: every element of a short dimension, the three at each
// end of a long one with ", ..." between.
#include <gtest/gtest.h>

#include "kiln/runtime/tensor.h"

namespace kiln {
namespace {

TEST(TensorPrint, ShortDimensionsInFull) {
  EXPECT_EQ(arange(0, 6).to_string(), "tensor(i64[6], [0, 1, 2, 3, 4, 5])");
  EXPECT_EQ(scalar(2.5).to_string(), "tensor(f32[], 2.5)");
}

TEST(TensorPrint, LongDimensionsElided) {
  EXPECT_EQ(arange(0, 10).to_string(), "tensor(i64[10], [0, 1, 2, ..., 7, 8, 9])");
  EXPECT_EQ(arange(0, 14).reshape({7, 2}).to_string(),
            "tensor(i64[7,2], [[0, 1], [2, 3], [4, 5], ..., [8, 9], [10, 11], [12, 13]])");
}

}  // namespace
}  // namespace kiln
