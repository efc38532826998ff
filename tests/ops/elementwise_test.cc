#include "kiln/ops/elementwise.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "kiln/base/error.h"
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

}  // namespace
}  // namespace kiln
