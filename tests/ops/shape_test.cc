#include "kiln/ops/shape.h"

#include <gtest/gtest.h>

#include "kiln/base/error.h"
#include "kiln/ops/elementwise.h"
#include "tests/support/coords.h"
#include "tests/support/gradcheck.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

using test::check_gradients;
using test::random_tensor;
using test::ravel;
using test::unravel;

// Naive concat: each output element found by walking the inputs along axis.
std::vector<double> ref_concat(const std::vector<Tensor>& xs, int axis, const Shape& out) {
  std::vector<std::vector<double>> host;
  for (const Tensor& x : xs) host.push_back(x.to_vector<double>());
  std::vector<double> r(size_t(out.numel()));
  for (int64_t i = 0; i < out.numel(); ++i) {
    std::vector<int64_t> c = unravel(i, out);
    size_t k = 0;
    while (c[size_t(axis)] >= xs[k].dim(axis)) c[size_t(axis)] -= xs[k++].dim(axis);
    r[size_t(i)] = host[k][size_t(ravel(c, xs[k].shape()))];
  }
  return r;
}

TEST(Concat, MatchesNaiveReferenceOnEveryAxis) {
  struct Case {
    std::vector<Shape> shapes;
    int axis;
  };
  std::vector<Case> cases = {
      {{{2, 3}, {4, 3}}, 0},
      {{{2, 3}, {2, 1}, {2, 5}}, 1},
      {{{2, 1, 4}, {2, 3, 4}}, 1},
      {{{1, 2, 3}, {1, 2, 2}}, 2},
      {{{5}}, 0},
      {{{2, 0, 3}, {2, 2, 3}}, 1},
  };
  uint64_t seed = 1;
  for (const Case& c : cases) {
    std::vector<Tensor> xs;
    for (const Shape& s : c.shapes) xs.push_back(random_tensor(s, DType::f32, seed++));
    Tensor out = concat(xs, c.axis);
    Shape expect_shape = c.shapes[0];
    expect_shape[c.axis] = 0;
    for (const Shape& s : c.shapes) expect_shape[c.axis] += s[c.axis];
    ASSERT_EQ(out.shape(), expect_shape);
    EXPECT_EQ(out.to_vector<double>(), ref_concat(xs, c.axis, expect_shape));
    EXPECT_EQ(concat(xs, c.axis - c.shapes[0].size()).to_vector<double>(), out.to_vector<double>())
        << "negative axis";
  }
}

TEST(Concat, ReadsStridedInputsAndKeepsDtype) {
  Tensor a = from_vector<int32_t>({0, 1, 2, 3, 4, 5}, {2, 3}).t();  // [3, 2], strided
  Tensor b = from_vector<int32_t>({6, 7}, {1, 2});
  Tensor out = concat({a, b}, 0);
  EXPECT_EQ(out.dtype(), DType::i32);
  EXPECT_EQ(out.to_vector<int32_t>(), (std::vector<int32_t>{0, 3, 1, 4, 2, 5, 6, 7}));
}

TEST(Concat, RejectsMismatchedInputs) {
  Tensor a = zeros({2, 3});
  EXPECT_THROW(concat({a, zeros({2, 4})}, 0), Error);
  EXPECT_THROW(concat({a, zeros({2, 3}, DType::f64)}, 0), Error);
  EXPECT_THROW(concat({a, zeros({2, 3, 1})}, 0), Error);
  EXPECT_THROW(concat({a, a}, 2), Error);
  EXPECT_THROW(concat({}, 0), Error);
  EXPECT_THROW(concat({scalar(1.0), scalar(2.0)}, 0), Error);  // no axis to join along
  try {
    concat({a, zeros({3, 4})}, 1);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("concat"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("f32[3,4]"), std::string::npos) << e.what();
  }
}

TEST(Concat, Gradients) {
  auto fn = [](int axis) {
    return [axis](const std::vector<Tensor>& a) { return concat(a, axis); };
  };
  EXPECT_TRUE(check_gradients(fn(0), {random_tensor({2, 3}, DType::f64, 1),
                                      random_tensor({1, 3}, DType::f64, 2),
                                      random_tensor({3, 3}, DType::f64, 3)}));
  EXPECT_TRUE(check_gradients(fn(-1), {random_tensor({2, 1, 2}, DType::f64, 4),
                                       random_tensor({2, 1, 3}, DType::f64, 5)}));
  // An input used twice accumulates both slices' cotangents.
  EXPECT_TRUE(check_gradients(
      [](const std::vector<Tensor>& a) { return concat({a[0], a[1], a[0]}, 1); },
      {random_tensor({2, 2}, DType::f64, 6), random_tensor({2, 1}, DType::f64, 7)}));
}

TEST(Stack, ScalarsAndTensorsGainALeadingAxis) {
  EXPECT_EQ(stack({scalar(1.0), scalar(2.0), scalar(3.0)}).to_vector<float>(),
            (std::vector<float>{1, 2, 3}));
  Tensor s = stack({zeros({2, 3}), ones({2, 3})});
  EXPECT_EQ(s.shape(), Shape({2, 2, 3}));
  EXPECT_EQ(s.select(0, 1).to_vector<float>(), std::vector<float>(6, 1.0f));
}

TEST(Split, PiecesMatchSlices) {
  Tensor x = random_tensor({3, 7, 2}, DType::f32, 8);
  std::vector<double> host = x.to_vector<double>();
  std::vector<Tensor> parts = split(x, {2, 0, 4, 1}, 1);
  ASSERT_EQ(parts.size(), 4u);
  int64_t start = 0;
  for (const Tensor& p : parts) {
    ASSERT_EQ(p.shape(), (Shape{3, p.dim(1), 2}));
    std::vector<double> expect;
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = start; j < start + p.dim(1); ++j)
        for (int64_t k = 0; k < 2; ++k) expect.push_back(host[size_t((i * 7 + j) * 2 + k)]);
    EXPECT_EQ(p.to_vector<double>(), expect);
    start += p.dim(1);
  }
  EXPECT_EQ(split(x, {1, 2}, 0)[1].to_vector<double>(),
            std::vector<double>(host.begin() + 14, host.end()));
}

TEST(Split, RejectsSizesThatDoNotAddUp) {
  Tensor x = zeros({4, 3});
  EXPECT_THROW(split(x, {1, 2}, 0), Error);
  EXPECT_THROW(split(x, {5, -1}, 0), Error);
  EXPECT_THROW(split(x, {}, 0), Error);
  EXPECT_THROW(split(x, {4}, 2), Error);
}

TEST(Split, GradientsTreatUnusedPiecesAsZero) {
  // Piece 1 is never used, so it has no cotangent; the others are reordered.
  EXPECT_TRUE(check_gradients(
      [](const std::vector<Tensor>& a) {
        std::vector<Tensor> p = split(a[0], {1, 2, 1}, 1);
        return concat({p[2], p[0]}, 1);
      },
      {random_tensor({3, 4}, DType::f64, 9)}));
  EXPECT_TRUE(check_gradients(
      [](const std::vector<Tensor>& a) {
        std::vector<Tensor> p = split(a[0], {2, 1}, 0);
        return p[0] * p[1];  // [2, 1, 2] * [1, 1, 2] broadcasts
      },
      {random_tensor({3, 1, 2}, DType::f64, 10)}));
}

// Naive pad: out[c] = x[c - before] where inside, else value.
std::vector<double> ref_pad(const Tensor& x, const std::vector<std::pair<int64_t, int64_t>>& pads,
                            double value) {
  Shape out = x.shape();
  for (int d = 0; d < out.size(); ++d) out[d] += pads[size_t(d)].first + pads[size_t(d)].second;
  std::vector<double> host = x.to_vector<double>();
  std::vector<double> r(size_t(out.numel()), value);
  for (int64_t i = 0; i < out.numel(); ++i) {
    std::vector<int64_t> c = unravel(i, out);
    bool inside = true;
    for (int d = 0; d < out.size(); ++d) {
      c[size_t(d)] -= pads[size_t(d)].first;
      inside = inside && c[size_t(d)] >= 0 && c[size_t(d)] < x.dim(d);
    }
    if (inside) r[size_t(i)] = host[size_t(ravel(c, x.shape()))];
  }
  return r;
}

TEST(Pad, MatchesNaiveReference) {
  std::vector<std::pair<Shape, std::vector<std::pair<int64_t, int64_t>>>> cases = {
      {{3}, {{2, 1}}},
      {{2, 3}, {{0, 0}, {1, 2}}},
      {{2, 1, 3}, {{1, 0}, {2, 2}, {0, 3}}},
      {{0, 2}, {{1, 1}, {0, 1}}},
  };
  uint64_t seed = 20;
  for (const auto& [shape, pads] : cases) {
    Tensor x = random_tensor(shape, DType::f32, seed++);
    Tensor out = pad(x, pads, -3.5);
    EXPECT_EQ(out.to_vector<double>(), ref_pad(x, pads, -3.5)) << shape;
  }
  Tensor ints = from_vector<int64_t>({1, 2, 3, 4}, {2, 2});
  EXPECT_EQ(pad(ints, {{1, 0}, {0, 1}}, 9).to_vector<int64_t>(),
            (std::vector<int64_t>{9, 9, 9, 1, 2, 9, 3, 4, 9}));
  Tensor strided = from_vector<float>({1, 2, 3, 4}, {2, 2}).t();
  EXPECT_EQ(pad(strided, {{0, 1}, {0, 0}}).to_vector<float>(),
            (std::vector<float>{1, 3, 2, 4, 0, 0}));
}

TEST(Pad, RejectsNegativeOrMissingPads) {
  Tensor x = zeros({2, 3});
  try {
    pad(x, {{0, 0}, {-1, 0}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("negative"), std::string::npos) << e.what();
  }
  EXPECT_THROW(pad(x, {{1, 1}}), Error);
}

TEST(Pad, Gradients) {
  auto fn = [](std::vector<std::pair<int64_t, int64_t>> pads) {
    return [pads](const std::vector<Tensor>& a) { return pad(a[0], pads, 2); };
  };
  EXPECT_TRUE(check_gradients(fn({{1, 2}}), {random_tensor({3}, DType::f64, 30)}));
  EXPECT_TRUE(
      check_gradients(fn({{0, 0}, {1, 0}, {2, 1}}), {random_tensor({2, 1, 3}, DType::f64, 31)}));
  EXPECT_TRUE(check_gradients(fn({{0, 0}, {0, 0}}), {random_tensor({2, 2}, DType::f64, 32)}));
}

}  // namespace
}  // namespace kiln
