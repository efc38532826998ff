#include <gtest/gtest.h>

#include "kiln/runtime/tensor.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

Tensor iota(const Shape& s) {
  std::vector<float> v(size_t(s.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i);
  return from_vector(v, s);
}

TEST(Views, TransposeSharesStorageAndReadsStrided) {
  Tensor a = iota({2, 3});
  Tensor t = a.t();
  EXPECT_EQ(t.shape(), (Shape{3, 2}));
  EXPECT_EQ(t.impl().storage, a.impl().storage);
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
}

TEST(Views, SliceWithStepAndSelect) {
  Tensor a = iota({4, 5});
  EXPECT_EQ(a.slice(1, 0, 5, 2).to_vector<float>(),
            (std::vector<float>{0, 2, 4, 5, 7, 9, 10, 12, 14, 15, 17, 19}));
  EXPECT_EQ(a.select(0, -1).to_vector<float>(), (std::vector<float>{15, 16, 17, 18, 19}));
}

TEST(Views, WriteThroughSliceIsVisibleInBase) {
  Tensor a = zeros({3, 4});
  a.slice(1, 1, 3).fill_(7);
  a.select(0, 2).copy_(iota({4}));
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{0, 7, 7, 0, 0, 7, 7, 0, 0, 1, 2, 3}));
}

TEST(Views, ReshapeOfTransposeCopies) {
  Tensor a = iota({2, 3});
  Tensor r = a.t().reshape({6});
  EXPECT_NE(r.impl().storage, a.impl().storage);
  EXPECT_EQ(r.to_vector<float>(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
}

TEST(Views, ExpandBroadcastsWithoutCopy) {
  Tensor a = iota({3, 1});
  Tensor e = a.expand({3, 2});
  EXPECT_EQ(e.impl().storage, a.impl().storage);
  EXPECT_EQ(e.to_vector<float>(), (std::vector<float>{0, 0, 1, 1, 2, 2}));
}

}  // namespace
}  // namespace kiln
