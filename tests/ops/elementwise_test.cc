#include "kiln/ops/elementwise.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "kiln/autograd/grad.h"
#include "kiln/base/error.h"
#include "kiln/ops/reduction.h"
#include "tests/support/gradcheck.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

std::vector<double> host(const Tensor& t) { return t.to_vector<double>(); }

Tensor values(std::vector<double> v, const Shape& s, DType t = DType::f32) {
  return from_vector(v, s).to(t);
}

struct UnaryCase {
  const char* name;
  std::function<Tensor(const Tensor&)> op;
  std::function<double(double)> ref;
  double lo, hi;
};

const double kPi = 3.14159265358979323846;

std::vector<UnaryCase> unary_cases() {
  return {
      {"neg", [](const Tensor& x) { return neg(x); }, [](double x) { return -x; }, -3, 3},
      {"abs", [](const Tensor& x) { return abs(x); }, [](double x) { return std::abs(x); }, -3, 3},
      {"exp", [](const Tensor& x) { return exp(x); }, [](double x) { return std::exp(x); }, -3, 3},
      {"log", [](const Tensor& x) { return log(x); }, [](double x) { return std::log(x); }, 0.1, 5},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, [](double x) { return std::sqrt(x); }, 0.1, 5},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }, [](double x) { return 1 / std::sqrt(x); }, 0.1, 5},
      {"reciprocal", [](const Tensor& x) { return reciprocal(x); }, [](double x) { return 1 / x; }, 0.5, 5},
      {"square", [](const Tensor& x) { return square(x); }, [](double x) { return x * x; }, -3, 3},
      {"tanh", [](const Tensor& x) { return tanh(x); }, [](double x) { return std::tanh(x); }, -3, 3},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, [](double x) { return 1 / (1 + std::exp(-x)); }, -6, 6},
      {"silu", [](const Tensor& x) { return silu(x); }, [](double x) { return x / (1 + std::exp(-x)); }, -6, 6},
      {"gelu", [](const Tensor& x) { return gelu(x); },
       [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }, -4, 4},
      {"gelu_tanh", [](const Tensor& x) { return gelu(x, true); },
       [](double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / kPi) * (x + 0.044715 * x * x * x))); }, -4, 4},
      {"sin", [](const Tensor& x) { return sin(x); }, [](double x) { return std::sin(x); }, -4, 4},
      {"cos", [](const Tensor& x) { return cos(x); }, [](double x) { return std::cos(x); }, -4, 4},
      {"erf", [](const Tensor& x) { return erf(x); }, [](double x) { return std::erf(x); }, -3, 3},
  };
}

TEST(Elementwise, UnaryMatchesStdMathInEveryFloatDType) {
  const std::pair<DType, double> dtypes[] = {
      {DType::f64, 1e-12}, {DType::f32, 2e-6}, {DType::bf16, 1e-2}, {DType::f16, 2e-3}};
  for (const UnaryCase& c : unary_cases()) {
    std::vector<double> xs(257);
    for (size_t i = 0; i < xs.size(); ++i) xs[i] = c.lo + (c.hi - c.lo) * double(i) / (xs.size() - 1);
    for (auto [dt, tol] : dtypes) {
      Tensor x = values(xs, {257}, dt);
      std::vector<double> xr = host(x);  // inputs as rounded to dt
      std::vector<double> expect(xr.size());
      for (size_t i = 0; i < xr.size(); ++i) expect[i] = c.ref(xr[i]);
      EXPECT_TRUE(test::all_close(host(c.op(x)), expect, tol, tol)) << c.name << " " << dtype_name(dt);
    }
  }
}

TEST(Elementwise, BinaryBroadcastsLikeNumPy) {
  Tensor a = values({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = values({10, 20, 30}, {3});
  Tensor c = values({100, 200}, {2, 1});
  EXPECT_EQ(host(a + b), (std::vector<double>{11, 22, 33, 14, 25, 36}));
  EXPECT_EQ(host(a * c), (std::vector<double>{100, 200, 300, 800, 1000, 1200}));
  EXPECT_EQ(host(b - c).size(), 6u);
  EXPECT_EQ((b - c).shape(), (Shape{2, 3}));
  EXPECT_EQ(host(b - c), (std::vector<double>{-90, -80, -70, -190, -180, -170}));
  EXPECT_EQ(host(a / 2.0), (std::vector<double>{0.5, 1, 1.5, 2, 2.5, 3}));
  EXPECT_EQ(host(1.0 - a), (std::vector<double>{0, -1, -2, -3, -4, -5}));
}

// One value per row broadcast along rows longer than the CPU loop's runs of
// copies (256), and not a multiple of them; in every operand position, with
// 1, 2 and 8-byte elements. Small integers: every result is exact.
TEST(Elementwise, PerRowValuesBroadcastAlongLongRows) {
  constexpr int64_t rows = 3, cols = 700;
  std::vector<double> xv(rows * cols), wv{1, -2, 3}, vv(cols);
  for (int64_t i = 0; i < rows * cols; ++i) xv[size_t(i)] = double(i % 17 - 8);
  for (int64_t j = 0; j < cols; ++j) vv[size_t(j)] = double(j % 5);
  for (DType t : {DType::f32, DType::bf16, DType::i64}) {
    SCOPED_TRACE(dtype_name(t));
    Tensor x = values(xv, {rows, cols}, t), w = values(wv, {rows, 1}, t);
    Tensor v = values(vv, {1, cols}, t);
    Tensor cond = from_vector<bool>({true, false, true}, {rows, 1});
    std::vector<double> xw, wx, wv_sum, picked;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < cols; ++j) {
        double xe = xv[size_t(r * cols + j)], we = wv[size_t(r)];
        xw.push_back(xe * we);
        wx.push_back(we - xe);
        wv_sum.push_back(we + vv[size_t(j)]);
        picked.push_back(r == 1 ? we : xe);
      }
    EXPECT_EQ(host(x * w), xw);
    EXPECT_EQ(host(w - x), wx);
    EXPECT_EQ(host(w + v), wv_sum);
    EXPECT_EQ(host(where(cond, x, w)), picked);
  }
}

TEST(Elementwise, BinaryOpsOnStridedViews) {
  Tensor a = values({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor t = a.t();  // [3,2], non-contiguous
  EXPECT_EQ(host(t + t), (std::vector<double>{2, 8, 4, 10, 6, 12}));
  EXPECT_EQ(host(pow(t, 2.0)), (std::vector<double>{1, 16, 4, 25, 9, 36}));
  EXPECT_EQ(host(maximum(t, values({3.5}, {1}))), (std::vector<double>{3.5, 4, 3.5, 5, 3.5, 6}));
  EXPECT_EQ(host(minimum(t, values({3.5}, {1}))), (std::vector<double>{1, 3.5, 2, 3.5, 3, 3.5}));
}

TEST(Elementwise, IntegerArithmetic) {
  Tensor a = from_vector<int64_t>({1, -2, 3}, {3});
  Tensor b = from_vector<int64_t>({4, 5, -6}, {3});
  EXPECT_EQ((a + b).to_vector<int64_t>(), (std::vector<int64_t>{5, 3, -3}));
  EXPECT_EQ((a * b).to_vector<int64_t>(), (std::vector<int64_t>{4, -10, -18}));
  EXPECT_EQ(abs(a).to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(maximum(a, b).to_vector<int64_t>(), (std::vector<int64_t>{4, 5, 3}));
}

TEST(Elementwise, ComparisonsLogicalAndWhere) {
  Tensor a = values({1, 2, 3, 4}, {4});
  Tensor b = values({4, 2, 1, 4}, {4});
  EXPECT_EQ(lt(a, b).to_vector<bool>(), (std::vector<bool>{true, false, false, false}));
  EXPECT_EQ(le(a, b).to_vector<bool>(), (std::vector<bool>{true, true, false, true}));
  EXPECT_EQ(eq(a, b).to_vector<bool>(), (std::vector<bool>{false, true, false, true}));
  EXPECT_EQ(ne(a, b).to_vector<bool>(), (std::vector<bool>{true, false, true, false}));
  EXPECT_EQ(gt(a, b).to_vector<bool>(), (std::vector<bool>{false, false, true, false}));
  EXPECT_EQ(ge(a, b).to_vector<bool>(), (std::vector<bool>{false, true, true, true}));
  Tensor m = lt(a, b), n = eq(a, b);
  EXPECT_EQ(logical_or(m, n).to_vector<bool>(), (std::vector<bool>{true, true, false, true}));
  EXPECT_EQ(logical_and(m, logical_not(n)).to_vector<bool>(), (std::vector<bool>{true, false, false, false}));
  EXPECT_EQ(host(where(m, a, b)), (std::vector<double>{1, 2, 1, 4}));
  // Condition broadcasts against values.
  Tensor col = from_vector<bool>({true, false}, {2, 1});
  EXPECT_EQ(host(where(col, values({1, 2}, {2}), values({9}, {1}))), (std::vector<double>{1, 2, 9, 9}));
}

TEST(Elementwise, Bf16RoundsToNearestEven) {
  // 1 + 2^-8 is halfway between two bf16 values: ties go to the even one (1).
  // 1 + 3*2^-8 is halfway between 1+2^-7 and 1+2^-6: even is 1+2^-6.
  Tensor x = values({1 + 1.0 / 256, 1 + 3.0 / 256, -(1 + 1.0 / 256)}, {3}, DType::bf16);
  EXPECT_EQ(host(x), (std::vector<double>{1, 1 + 1.0 / 64, -1}));
  Tensor h = values({1 + 1.0 / 2048, 1 + 3.0 / 2048}, {2}, DType::f16);
  EXPECT_EQ(host(h), (std::vector<double>{1, 1 + 1.0 / 512}));
}

TEST(Elementwise, ErrorsNameTheOpAndShapes) {
  Tensor a = zeros({2, 3}), b = zeros({4});
  try {
    add(a, b);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("'add'"), std::string::npos) << m;
    EXPECT_NE(m.find("[2,3]"), std::string::npos) << m;
    EXPECT_NE(m.find("[4]"), std::string::npos) << m;
  }
  EXPECT_THROW(add(a, zeros({2, 3}, DType::bf16)), Error);
  EXPECT_THROW(exp(from_vector<int64_t>({1}, {1})), Error);
  EXPECT_THROW(logical_and(a, a), Error);
}

using test::check_gradients;
using test::random_tensor;

TEST(ElementwiseGrad, UnaryOpsMatchFiniteDifferences) {
  for (const UnaryCase& c : unary_cases()) {
    if (std::string(c.name) == "abs") continue;  // kink at 0: checked below away from it
    for (Shape s : {Shape{7}, Shape{2, 1, 3}, Shape{}}) {
      Tensor x = random_tensor(s, DType::f64, 11, c.lo, c.hi);
      EXPECT_TRUE(check_gradients([&](const std::vector<Tensor>& a) { return c.op(a[0]); }, {x}))
          << c.name << " " << s;
    }
  }
  Tensor away = from_vector<double>({-2, -0.5, 0.5, 3}, {4});
  EXPECT_TRUE(check_gradients([](const std::vector<Tensor>& a) { return abs(a[0]); }, {away}));
}

TEST(ElementwiseGrad, BinaryOpsBroadcastingAndSizeOneDims) {
  using Fn = std::function<Tensor(const Tensor&, const Tensor&)>;
  std::vector<std::pair<const char*, Fn>> ops = {
      {"add", [](const Tensor& a, const Tensor& b) { return a + b; }},
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; }},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }},
      {"div", [](const Tensor& a, const Tensor& b) { return a / b; }},
      {"pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); }},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }},
      {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); }},
  };
  std::vector<std::pair<Shape, Shape>> shapes = {
      {{4}, {4}}, {{2, 3}, {3}}, {{2, 1, 4}, {3, 1}}, {{1}, {2, 2}}, {{}, {3}}};
  for (auto& [name, op] : ops) {
    for (auto& [sa, sb] : shapes) {
      // Positive bases for pow and divisors bounded away from zero.
      Tensor a = random_tensor(sa, DType::f64, 21, 0.5, 2.0);
      Tensor b = random_tensor(sb, DType::f64, 22, 0.5, 2.0);
      EXPECT_TRUE(check_gradients([&](const std::vector<Tensor>& v) { return op(v[0], v[1]); }, {a, b}))
          << name << " " << sa << " " << sb;
    }
  }
}

TEST(ElementwiseGrad, WhereRoutesGradients) {
  Tensor cond = from_vector<bool>({true, false, true}, {3});
  Tensor a = random_tensor({2, 3}, DType::f64, 31), b = random_tensor({3}, DType::f64, 32);
  EXPECT_TRUE(check_gradients([&](const std::vector<Tensor>& v) { return where(cond, v[0], v[1]); }, {a, b}));
}

TEST(ElementwiseGrad, MaximumSplitsTiesEvenly) {
  auto f = value_and_grad([](const std::vector<Tensor>& v) {
    return std::vector<Tensor>{sum(maximum(v[0], v[1]))};
  });
  ValueAndGrad r = f({from_vector<double>({1, 2}, {2}), from_vector<double>({1, 3}, {2})});
  EXPECT_EQ(r.grads[0].to_vector<double>(), (std::vector<double>{0.5, 0}));
  EXPECT_EQ(r.grads[1].to_vector<double>(), (std::vector<double>{0.5, 1}));
}

TEST(ElementwiseGrad, CastPassesGradientInTheInputDtype) {
  Tensor x = random_tensor({3}, DType::f64, 41);
  EXPECT_TRUE(check_gradients([](const std::vector<Tensor>& a) { return a[0].to(DType::f32).to(DType::f64); },
                              {x}, {.eps = 1e-2, .rtol = 1e-5, .atol = 1e-5}));
}

}  // namespace
}  // namespace kiln
