// topk against a naive selection written here, its tie and NaN order, its
// gradient against finite differences, and its errors.
#include "kiln/ops/topk.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "kiln/base/error.h"
#include "kiln/kiln.h"
#include "tests/support/gradcheck.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

using test::check_gradients;
using test::random_tensor;

// Lines along `axis` of a row-major [outer, n, inner] array, each reduced to
// its k largest (value desc, index asc).
void reference(const std::vector<double>& x, int64_t outer, int64_t n, int64_t inner, int64_t k,
               std::vector<double>& values, std::vector<int64_t>& indices) {
  values.assign(size_t(outer * k * inner), 0);
  indices.assign(values.size(), 0);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      std::vector<int64_t> idx(static_cast<size_t>(n));
      std::iota(idx.begin(), idx.end(), 0);
      auto at = [&](int64_t j) { return x[size_t((o * n + j) * inner + i)]; };
      std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return at(a) > at(b); });
      for (int64_t j = 0; j < k; ++j) {
        values[size_t((o * k + j) * inner + i)] = at(idx[j]);
        indices[size_t((o * k + j) * inner + i)] = idx[j];
      }
    }
}

TEST(Topk, MatchesNaiveSelection) {
  struct Case {
    Shape shape;
    int64_t axis, k;
  };
  for (auto [shape, axis, k] : std::vector<Case>{
           {{7}, 0, 3}, {{4, 9}, 1, 2}, {{4, 9}, -1, 9}, {{5, 3, 2}, 0, 4}, {{2, 6, 3}, 1, 1},
           {{3, 4}, 1, 0}, {{300, 128}, 1, 8}}) {
    Tensor x = random_tensor(shape, DType::f32, 11);
    int a = axis < 0 ? int(axis) + shape.size() : int(axis);
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < a; ++d) outer *= shape[d];
    for (int d = a + 1; d < shape.size(); ++d) inner *= shape[d];
    std::vector<double> v;
    std::vector<int64_t> i;
    reference(x.to_vector<double>(), outer, shape[a], inner, k, v, i);
    auto [values, indices] = topk(x, k, axis);
    Shape out = shape;
    out[a] = k;
    EXPECT_EQ(values.shape(), out);
    EXPECT_EQ(indices.dtype(), DType::i64);
    EXPECT_EQ(values.to_vector<double>(), v) << shape;
    EXPECT_EQ(indices.to_vector<int64_t>(), i) << shape;
  }
}

TEST(Topk, TiesToLowerIndexNanLargestIntegers) {
  EagerModeGuard strict(EagerMode::strict);  // debug mode would reject the NaN
  double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = from_vector<float>({1, 3, 3, float(nan), 3, 0}, {6}, kCPU);
  auto [v, i] = topk(x, 4);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{3, 1, 2, 4}));
  // A full-length topk of -ids is a stable ascending sort.
  Tensor ids = from_vector<int64_t>({2, 0, 2, 1, 0}, {5}, kCPU);
  auto [sv, order] = topk(neg(ids), 5);
  EXPECT_EQ(order.to_vector<int64_t>(), (std::vector<int64_t>{1, 4, 3, 0, 2}));
  EXPECT_EQ(sv.dtype(), DType::i64);
}

TEST(Topk, Gradient) {
  for (auto [shape, axis, k] : std::vector<std::tuple<Shape, int64_t, int64_t>>{
           {{6}, 0, 2}, {{3, 5}, 1, 3}, {{4, 2, 3}, 0, 2}, {{2, 1}, 1, 1}}) {
    Tensor x = random_tensor(shape, DType::f64, 5);
    EXPECT_TRUE(check_gradients(
        [axis, k](const std::vector<Tensor>& a) { return topk(a[0], k, axis).first; }, {x}))
        << shape;
  }
}

TEST(Topk, Errors) {
  EXPECT_THROW(topk(zeros({3, 4}), 5, 1), Error);
  EXPECT_THROW(topk(zeros({3, 4}), -1, 1), Error);
  EXPECT_THROW(topk(zeros({3, 4}), 1, 2), Error);
  EXPECT_THROW(topk(zeros({3}, DType::b8), 1), Error);
  EXPECT_THROW(topk(scalar(1.0), 1), Error);
}

}  // namespace
}  // namespace kiln
