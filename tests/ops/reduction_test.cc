#include "kiln/ops/reduction.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "kiln/autograd/grad.h"
#include "kiln/base/error.h"
#include "kiln/ops/elementwise.h"
#include "kiln/runtime/threads.h"
#include "tests/support/gradcheck.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

using test::all_close;
using test::error_of;
using test::random_tensor;

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

std::vector<double> host(const Tensor& t) { return t.to_vector<double>(); }

// ---- Naive reference: elements grouped by the output they reduce into ----

std::vector<int64_t> norm_axes(std::vector<int64_t> axes, int rank) {
  if (axes.empty())
    for (int i = 0; i < rank; ++i) axes.push_back(i);
  for (int64_t& a : axes) a = a < 0 ? a + rank : a;
  return axes;
}

// For every element (row-major), the row-major index of its output.
std::vector<int64_t> output_of(const Shape& shape, const std::vector<int64_t>& axes) {
  std::vector<int64_t> out(size_t(shape.numel()));
  std::vector<int64_t> idx(size_t(shape.size()), 0);
  for (size_t e = 0; e < out.size(); ++e) {
    int64_t o = 0;
    for (int d = 0; d < shape.size(); ++d)
      if (std::find(axes.begin(), axes.end(), d) == axes.end()) o = o * shape[d] + idx[size_t(d)];
    out[e] = o;
    for (int d = shape.size() - 1; d >= 0; --d) {
      if (++idx[size_t(d)] < shape[d]) break;
      idx[size_t(d)] = 0;
    }
  }
  return out;
}

// groups[o]: the elements of output o in row-major order of the reduced axes.
std::vector<std::vector<double>> groups(const std::vector<double>& x, const Shape& shape,
                                        const std::vector<int64_t>& axes) {
  std::vector<int64_t> owner = output_of(shape, axes);
  int64_t outputs = 1;
  for (int d = 0; d < shape.size(); ++d)
    if (std::find(axes.begin(), axes.end(), d) == axes.end()) outputs *= shape[d];
  std::vector<std::vector<double>> g(static_cast<size_t>(outputs));
  for (size_t e = 0; e < x.size(); ++e) g[size_t(owner[e])].push_back(x[e]);
  return g;
}

double ref_sum(const std::vector<double>& g) {
  double s = 0;
  for (double v : g) s += v;
  return s;
}
double ref_mean(const std::vector<double>& g) { return ref_sum(g) / double(g.size()); }
double ref_max(const std::vector<double>& g) { return *std::max_element(g.begin(), g.end()); }
double ref_min(const std::vector<double>& g) { return *std::min_element(g.begin(), g.end()); }
double ref_argmax(const std::vector<double>& g) {
  return double(std::max_element(g.begin(), g.end()) - g.begin());  // the first maximum
}
double ref_logsumexp(const std::vector<double>& g) {
  double s = 0;
  for (double v : g) s += std::exp(v);
  return std::log(s);
}
double ref_var(const std::vector<double>& g, int correction) {
  double m = ref_mean(g), s = 0;
  for (double v : g) s += (v - m) * (v - m);
  return s / double(int64_t(g.size()) - correction);
}

std::vector<double> reference(const Tensor& x, const std::vector<int64_t>& axes,
                              const std::function<double(const std::vector<double>&)>& f) {
  std::vector<double> out;
  for (const auto& g : groups(host(x), x.shape(), norm_axes(axes, x.rank()))) out.push_back(f(g));
  return out;
}

// softmax or log_softmax of each element against its row along `axis`.
std::vector<double> ref_softmax(const Tensor& x, int64_t axis, bool log) {
  std::vector<double> xs = host(x);
  auto axes = norm_axes({axis}, x.rank());
  std::vector<int64_t> owner = output_of(x.shape(), axes);
  auto rows = groups(xs, x.shape(), axes);
  std::vector<double> m, s;
  for (const auto& row : rows) {
    m.push_back(ref_max(row));
    s.push_back(0);
    for (double v : row) s.back() += std::exp(v - m.back());
  }
  std::vector<double> out(xs.size());
  for (size_t e = 0; e < xs.size(); ++e) {
    size_t r = size_t(owner[e]);
    out[e] = log ? xs[e] - m[r] - std::log(s[r]) : std::exp(xs[e] - m[r]) / s[r];
  }
  return out;
}

struct AxesCase {
  Shape shape;
  std::vector<int64_t> axes;
};

std::vector<AxesCase> axes_cases() {
  return {
      {{2, 3, 4}, {}},       {{2, 3, 4}, {0}},      {{2, 3, 4}, {1}},      {{2, 3, 4}, {2}},
      {{2, 3, 4}, {-1}},     {{2, 3, 4}, {0, 2}},   {{2, 3, 4}, {-3, -1}}, {{2, 3, 4}, {2, 1}},
      {{5, 1, 7}, {1}},      {{5, 1, 7}, {0, 1}},   {{1, 1}, {}},          {{}, {}},
      {{7}, {0}},            {{3, 17, 300}, {0, 2}}, {{64, 5000}, {1}},    {{5000, 64}, {0}},
      {{2, 9000}, {}},       {{3, 10000, 2}, {1}},
      // Several reduced axes that do not merge, with and without a
      // contiguous kept inner axis, some longer than one chunk.
      {{6, 5, 4, 40}, {0, 2}}, {{5, 3, 2000}, {0, 2}}, {{5, 3, 2000, 16}, {0, 2}},
  };
}

// Expected shape of a reduction, from the definition.
Shape expected_shape(const Shape& s, const std::vector<int64_t>& axes, bool keepdim) {
  auto ax = norm_axes(axes, s.size());
  Shape out;
  for (int d = 0; d < s.size(); ++d) {
    bool r = std::find(ax.begin(), ax.end(), d) != ax.end();
    if (!r) out.push_back(s[d]);
    else if (keepdim) out.push_back(1);
  }
  return out;
}

struct FloatOp {
  const char* name;
  std::function<Tensor(const Tensor&, const std::vector<int64_t>&, bool)> op;
  std::function<double(const std::vector<double>&)> ref;
};

std::vector<FloatOp> float_ops() {
  return {
      {"sum", [](auto& x, auto& a, bool k) { return sum(x, a, k); }, ref_sum},
      {"mean", [](auto& x, auto& a, bool k) { return mean(x, a, k); }, ref_mean},
      {"max", [](auto& x, auto& a, bool k) { return max(x, a, k); }, ref_max},
      {"min", [](auto& x, auto& a, bool k) { return min(x, a, k); }, ref_min},
      {"logsumexp", [](auto& x, auto& a, bool k) { return logsumexp(x, a, k); }, ref_logsumexp},
      {"var", [](auto& x, auto& a, bool k) { return var(x, a, 1, k); },
       [](auto& g) { return ref_var(g, 1); }},
      {"var0", [](auto& x, auto& a, bool k) { return var(x, a, 0, k); },
       [](auto& g) { return ref_var(g, 0); }},
  };
}

TEST(Reduction, FloatOpsMatchNaiveReference) {
  // Tolerances: f32 accumulates in f32 (relative error ~ n * 2^-24 at worst,
  // far less in practice); bf16 and f16 accumulate in f32 and round the
  // result once (2^-9 and 2^-12 relative), so their bound is the rounding.
  const std::tuple<DType, double, double> dtypes[] = {{DType::f64, 1e-12, 1e-12},
                                                      {DType::f32, 2e-5, 2e-5},
                                                      {DType::bf16, 8e-3, 1e-2},
                                                      {DType::f16, 2e-3, 2e-3}};
  uint64_t seed = 1;
  for (const AxesCase& c : axes_cases()) {
    for (auto [dt, rtol, atol] : dtypes) {
      Tensor x = random_tensor(c.shape, dt, seed++, -2, 2);
      auto rows = groups(host(x), c.shape, norm_axes(c.axes, c.shape.size()));
      for (const FloatOp& f : float_ops()) {
        if (std::string(f.name) == "var" && rows[0].size() < 2)
          continue;  // unbiased variance of one element is undefined (checked below)
        std::vector<double> expect;
        for (const auto& g : rows) expect.push_back(f.ref(g));
        for (bool keepdim : {false, true}) {
          Tensor y = f.op(x, c.axes, keepdim);
          EXPECT_EQ(y.dtype(), dt);
          EXPECT_EQ(y.shape(), expected_shape(c.shape, c.axes, keepdim)) << f.name;
          // Sums of n terms of size ~1: scale atol by sqrt(n) for the 16-bit rounding.
          double scale = f.name == std::string("sum") ? std::sqrt(double(x.numel())) : 1;
          EXPECT_TRUE(all_close(host(y), expect, rtol, atol * scale))
              << f.name << " " << dtype_name(dt) << " shape " << c.shape << " axes "
              << ::testing::PrintToString(c.axes) << " keepdim " << keepdim;
        }
      }
    }
  }
}

TEST(Reduction, IntegerSumMaxMinArgmaxAreExact) {
  for (DType dt : {DType::i32, DType::i64}) {
    for (const AxesCase& c : axes_cases()) {
      Tensor x = random_tensor(c.shape, DType::f64, 7, -50, 50).to(dt);
      EXPECT_EQ(sum(x, c.axes).dtype(), dt);
      EXPECT_EQ(host(sum(x, c.axes)), reference(x, c.axes, ref_sum));
      EXPECT_EQ(host(max(x, c.axes, true)), reference(x, c.axes, ref_max));
      EXPECT_EQ(host(min(x, c.axes)), reference(x, c.axes, ref_min));
    }
    // Small values make ties: argmax must pick the first.
    Tensor x = random_tensor({4, 6, 5}, DType::f64, 8, -3, 3).to(dt);
    for (int64_t axis : {0, 1, 2, -1})
      EXPECT_EQ(host(argmax(x, axis)), reference(x, {axis}, ref_argmax)) << "axis " << axis;
  }
}

TEST(Reduction, SumOfBoolCounts) {
  Tensor b = from_vector<bool>({true, false, true, true, false, true}, {2, 3});
  Tensor s = sum(b, {1});
  EXPECT_EQ(s.dtype(), DType::i64);
  EXPECT_EQ(s.to_vector<int64_t>(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(sum(b).item<int64_t>(), 4);
}

TEST(Reduction, ArgmaxFloatShapesAndDtypes) {
  for (DType dt : {DType::f32, DType::bf16, DType::f64}) {
    Tensor x = random_tensor({3, 4, 5000}, dt, 9);
    for (int64_t axis : {0, 1, 2, -2}) {
      for (bool keepdim : {false, true}) {
        Tensor i = argmax(x, axis, keepdim);
        EXPECT_EQ(i.dtype(), DType::i64);
        EXPECT_EQ(i.shape(), expected_shape(x.shape(), {axis}, keepdim));
        EXPECT_EQ(host(i), reference(x, {axis}, ref_argmax)) << dtype_name(dt) << " axis " << axis;
      }
    }
  }
}

TEST(Reduction, SoftmaxAndLogSoftmaxMatchReference) {
  const std::tuple<DType, double> dtypes[] = {
      {DType::f64, 1e-12}, {DType::f32, 1e-5}, {DType::bf16, 1e-2}, {DType::f16, 2e-3}};
  const std::pair<Shape, int64_t> cases[] = {
      {{2, 3, 4}, 0}, {{2, 3, 4}, 1}, {{2, 3, 4}, -1}, {{5, 1, 7}, 1}, {{7}, 0},
      {{}, 0},        {{4, 3000}, 1}, {{3000, 4}, 0},  {{2, 20000}, -1},
  };
  uint64_t seed = 100;
  for (auto [shape, axis] : cases) {
    for (auto [dt, tol] : dtypes) {
      Tensor x = random_tensor(shape, dt, seed++, -4, 4);
      EXPECT_TRUE(all_close(host(softmax(x, axis)), ref_softmax(x, axis, false), tol, tol))
          << "softmax " << dtype_name(dt) << " " << shape << " axis " << axis;
      EXPECT_TRUE(all_close(host(log_softmax(x, axis)), ref_softmax(x, axis, true), tol, tol))
          << "log_softmax " << dtype_name(dt) << " " << shape << " axis " << axis;
    }
  }
}

TEST(Reduction, StridedViewsAndBroadcastInputs) {
  Tensor base = random_tensor({6, 40}, DType::f32, 11);
  Tensor t = base.t();                      // [40, 6], strides (1, 40)
  Tensor s = base.slice(1, 1, 40, 3);       // [6, 13], step 3
  Tensor e = base.slice(0, 0, 1).expand({5, 40});  // stride 0 on axis 0
  for (const Tensor& v : {t, s, e}) {
    for (std::vector<int64_t> axes : {std::vector<int64_t>{0}, {1}, {}}) {
      EXPECT_TRUE(all_close(host(sum(v, axes)), reference(v, axes, ref_sum), 1e-5, 1e-5));
      EXPECT_TRUE(all_close(host(max(v, axes)), reference(v, axes, ref_max), 0, 0));
      auto unbiased = [](const std::vector<double>& g) { return ref_var(g, 1); };
      EXPECT_TRUE(all_close(host(var(v, axes)), reference(v, axes, unbiased), 1e-4, 1e-5));
    }
    EXPECT_EQ(host(argmax(v, 0)), reference(v, {0}, ref_argmax));
    EXPECT_TRUE(all_close(host(softmax(v, 0)), ref_softmax(v, 0, false), 1e-5, 1e-6));
    EXPECT_TRUE(all_close(host(log_softmax(v, 1)), ref_softmax(v, 1, true), 1e-5, 1e-5));
  }
}

TEST(Reduction, HandDerivedSmallCases) {
  Tensor x = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(host(sum(x)), (std::vector<double>{21}));
  EXPECT_EQ(sum(x).shape(), Shape{});
  EXPECT_EQ(host(sum(x, {0})), (std::vector<double>{5, 7, 9}));
  EXPECT_EQ(host(mean(x, {1}, true)), (std::vector<double>{2, 5}));
  EXPECT_EQ(mean(x, {1}, true).shape(), (Shape{2, 1}));
  EXPECT_EQ(host(max(x, {-1})), (std::vector<double>{3, 6}));
  EXPECT_EQ(host(min(x, {0})), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(host(var(x, {1})), (std::vector<double>{1, 1}));
  EXPECT_TRUE(all_close(host(var(x, {}, 0)), {35.0 / 12}, 1e-6, 0));
  EXPECT_EQ(argmax(x, 1).to_vector<int64_t>(), (std::vector<int64_t>{2, 2}));
  EXPECT_TRUE(all_close(host(logsumexp(x, {1})),
                        {3 + std::log(1 + std::exp(-1.0) + std::exp(-2.0)),
                         6 + std::log(1 + std::exp(-1.0) + std::exp(-2.0))},
                        1e-6, 0));
}

TEST(Reduction, EmptyAndDegenerateReductions) {
  Tensor z = zeros({3, 0, 2});
  EXPECT_EQ(host(sum(z, {1})), std::vector<double>(6, 0.0));
  EXPECT_EQ(host(logsumexp(z, {1})), std::vector<double>(6, -kInf));
  EXPECT_TRUE(std::isnan(mean(z, {1}).to_vector<double>()[0]));
  EXPECT_EQ(sum(z, {0}).shape(), (Shape{0, 2}));
  EXPECT_EQ(sum(z, {0}).numel(), 0);
  // Unbiased variance of one element divides by zero, as torch.var: NaN.
  EXPECT_TRUE(std::isnan(var(ones({3, 1}), {1}).to_vector<double>()[0]));
  // Reducing a rank-0 tensor over axis 0 is the identity.
  Tensor s = scalar(2.5);
  EXPECT_EQ(sum(s, {0}).item<float>(), 2.5f);
  EXPECT_EQ(softmax(s, 0).item<float>(), 1.0f);
}

TEST(Reduction, NaNAndInfinities) {
  Tensor x = from_vector<double>({1, kNaN, 3, 2, 5, 4}, {2, 3});
  auto m = host(max(x, {1}));
  EXPECT_TRUE(std::isnan(m[0]));
  EXPECT_EQ(m[1], 5);
  EXPECT_TRUE(std::isnan(host(min(x, {1}))[0]));
  EXPECT_EQ(argmax(x, 1).to_vector<int64_t>(), (std::vector<int64_t>{1, 1}));
  // Stable: huge logits neither overflow nor lose the small differences.
  Tensor big = from_vector<float>({1000, 1001, 1002}, {3});
  double z = 1 + std::exp(-1.0) + std::exp(-2.0);
  EXPECT_TRUE(all_close(host(softmax(big, 0)), {std::exp(-2.0) / z, std::exp(-1.0) / z, 1 / z},
                        1e-6, 1e-7));
  EXPECT_TRUE(all_close(host(logsumexp(big)), {1002 + std::log(z)}, 1e-7, 0));
  Tensor neg_inf = from_vector<double>({-kInf, -kInf, 0, -kInf}, {2, 2});
  EXPECT_EQ(host(logsumexp(neg_inf, {1})), (std::vector<double>{-kInf, 0}));
  EXPECT_EQ(host(softmax(neg_inf, 1)).back(), 0);
  EXPECT_EQ(host(logsumexp(from_vector<double>({kInf, 1}, {2}))), (std::vector<double>{kInf}));
}

// ---- Gradients ----

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

TEST(Reduction, GradientsMatchFiniteDifferences) {
  const AxesCase cases[] = {{{2, 3, 4}, {}},  {{2, 3, 4}, {1}},  {{2, 3, 4}, {0, -1}},
                            {{4, 1, 3}, {1}}, {{4, 1, 3}, {0}},  {{5}, {0}},
                            {{1, 6}, {-1}}};
  uint64_t seed = 50;
  for (const FloatOp& f : float_ops()) {
    for (const AxesCase& c : cases) {
      int64_t n = c.shape.numel() / expected_shape(c.shape, c.axes, false).numel();
      if (f.name == std::string("var") && n < 2) continue;  // 0/0: no gradient to check
      for (bool keepdim : {false, true}) {
        Tensor x = random_tensor(c.shape, DType::f64, seed++);
        Fn fn = [&](const std::vector<Tensor>& a) { return f.op(a[0], c.axes, keepdim); };
        EXPECT_TRUE(test::check_gradients(fn, {x}))
            << f.name << " shape " << c.shape << " axes " << ::testing::PrintToString(c.axes)
            << " keepdim " << keepdim;
      }
    }
  }
  // Through a broadcast: the reduction's gradient meets expand's.
  Tensor x = random_tensor({3, 1}, DType::f64, 77);
  EXPECT_TRUE(test::check_gradients(
      [](const std::vector<Tensor>& a) { return logsumexp(a[0].expand({3, 4}), {0}); }, {x}));
}

TEST(Reduction, SoftmaxGradientsMatchFiniteDifferences) {
  const std::pair<Shape, int64_t> cases[] = {
      {{2, 3, 4}, 0}, {{2, 3, 4}, 1}, {{2, 3, 4}, -1}, {{4, 1}, 1}, {{1, 5}, 1}, {{6}, 0}};
  uint64_t seed = 300;
  for (auto [shape, axis] : cases) {
    Tensor x = random_tensor(shape, DType::f64, seed++, -2, 2);
    EXPECT_TRUE(test::check_gradients(
        [axis = axis](const std::vector<Tensor>& a) { return softmax(a[0], axis); }, {x}))
        << "softmax " << shape << " axis " << axis;
    EXPECT_TRUE(test::check_gradients(
        [axis = axis](const std::vector<Tensor>& a) { return log_softmax(a[0], axis); }, {x}))
        << "log_softmax " << shape << " axis " << axis;
  }
}

TEST(Reduction, MaxGradientIsSplitAmongTies) {
  auto grad_of = [](std::function<Tensor(const Tensor&)> f, const Tensor& x) {
    auto vag = value_and_grad(
        [&](const std::vector<Tensor>& a) { return std::vector<Tensor>{f(a[0])}; });
    return host(vag({x}).grads[0]);
  };
  Tensor x = from_vector<double>({1, 3, 3, 2, 7, 7, 7, 0}, {2, 4});
  // d/dx of sum(max(x, axis 1)): 1/2 to each of two tied 3s, 1/3 to each 7.
  std::vector<double> g = grad_of([](const Tensor& t) { return sum(max(t, {1})); }, x);
  EXPECT_TRUE(all_close(g, {0, 0.5, 0.5, 0, 1.0 / 3, 1.0 / 3, 1.0 / 3, 0}, 1e-12, 0));
  g = grad_of([](const Tensor& t) { return sum(min(t, {0})); }, x);
  EXPECT_TRUE(all_close(g, {1, 1, 1, 0, 0, 0, 0, 1}, 1e-12, 0));
}

// ---- Determinism ----

std::vector<uint32_t> bits(const Tensor& t) {
  std::vector<float> v = t.to_vector<float>();
  std::vector<uint32_t> b(v.size());
  std::memcpy(b.data(), v.data(), v.size() * 4);
  return b;
}

TEST(Reduction, SameBitsForAnyThreadCount) {
  const int saved = num_threads();
  Tensor big = random_tensor({1 << 23}, DType::f32, 21);
  Tensor rows = random_tensor({4, 1 << 20}, DType::f32, 22);
  Tensor cols = random_tensor({1 << 16, 24}, DType::f32, 23);
  std::vector<std::vector<uint32_t>> runs;
  for (int threads : {1, 2, 3}) {
    set_num_threads(threads);
    std::vector<uint32_t> r;
    Tensor results[] = {sum(big),       sum(rows, {1}),        sum(cols, {0}),
                        mean(cols, {0}), var(rows, {1}),        logsumexp(rows, {-1}),
                        softmax(rows, 1).slice(1, 0, 64)};
    for (const Tensor& t : results) {
      auto b = bits(t);
      r.insert(r.end(), b.begin(), b.end());
    }
    runs.push_back(r);
  }
  set_num_threads(saved);
  EXPECT_EQ(runs[0], runs[1]);
  EXPECT_EQ(runs[0], runs[2]);
}

TEST(Reduction, SameBitsForAnyLayout) {
  // One canonical order per result: a transposed view, its contiguous copy
  // and the original all sum to the same bits.
  Tensor x = random_tensor({37, 9000}, DType::f32, 31);
  Tensor xt = x.t();  // [9000, 37], strided
  EXPECT_EQ(bits(sum(x, {1})), bits(sum(xt, {0})));
  EXPECT_EQ(bits(sum(x, {1})), bits(sum(xt.contiguous(), {0})));
  EXPECT_EQ(bits(var(x, {1})), bits(var(xt.contiguous(), {0})));
  // Two reduced axes that only merge once the view is copied.
  Tensor v = random_tensor({5, 3, 2000, 16}, DType::f32, 32).permute({1, 3, 0, 2});
  EXPECT_EQ(bits(sum(v, {2, 3})), bits(sum(v.contiguous(), {2, 3})));
  EXPECT_EQ(bits(logsumexp(v, {2, 3})), bits(logsumexp(v.contiguous(), {2, 3})));
}

// ---- Errors ----

TEST(Reduction, ErrorsNameTheOpAndTheProblem) {
  Tensor x = zeros({2, 3});
  std::string e = error_of([&] { sum(x, {2}); });
  EXPECT_NE(e.find("sum"), std::string::npos) << e;
  EXPECT_NE(e.find("axis 2 is out of range"), std::string::npos) << e;
  e = error_of([&] { mean(x, {1, -1}); });
  EXPECT_NE(e.find("mean"), std::string::npos) << e;
  EXPECT_NE(e.find("listed twice"), std::string::npos) << e;
  e = error_of([&] { argmax(x, -3); });
  EXPECT_NE(e.find("argmax: axis -3 is out of range"), std::string::npos) << e;
  e = error_of([&] { softmax(x, 5); });
  EXPECT_NE(e.find("softmax: axis 5 is out of range"), std::string::npos) << e;
  e = error_of([&] { mean(zeros({2}, DType::i32)); });
  EXPECT_NE(e.find("needs a floating input, got i32"), std::string::npos) << e;
  e = error_of([&] { max(zeros({2, 0}), {1}); });
  EXPECT_NE(e.find("cannot reduce over axis 1 of size 0"), std::string::npos) << e;
  e = error_of([&] { var(x, {0, 0}); });
  EXPECT_NE(e.find("listed twice"), std::string::npos) << e;
}

}  // namespace
}  // namespace kiln
