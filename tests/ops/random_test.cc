#include "kiln/ops/random.h"

#include <gtest/gtest.h>

#include <cmath>

#include "kiln/autograd/grad.h"
#include "kiln/base/error.h"
#include "kiln/base/half.h"
#include "kiln/base/philox.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "kiln/runtime/context.h"
#include "kiln/runtime/threads.h"
#include "tests/support/gradcheck.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

// Random123's published known answers for Philox4x32-10 (kat_vectors):
// counter words, key words -> output words.
TEST(Philox, MatchesRandom123KnownAnswers) {
  struct Kat {
    PhiloxBlock ctr;
    PhiloxKey key;
    PhiloxBlock expect;
  };
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat& k : kats) EXPECT_EQ(philox4x32_10(k.ctr, k.key), k.expect);
  // kiln's layout: counter words (lo, hi, 0, 0), key words (lo, hi). The
  // expected words come from an independent Python Philox4x32-10 that
  // reproduces the three answers above.
  EXPECT_EQ(philox_block(0, 0), kats[0].expect);
  EXPECT_EQ(philox_block(0x299f31d0'a4093822ull, 0x85a308d3'243f6a88ull),
            (PhiloxBlock{0xe69c9c31, 0xb5a3d762, 0xe733bfc1, 0x341a787c}));
  static_assert(philox4x32_10({0, 0, 0, 0}, {0, 0})[0] == 0x6627e8d5, "usable at compile time");
}

// Element i of a draw, recomputed here from the documented formula:
// u = 53 bits (27 of word 0, 26 of word 1) / 2^53.
double expected_unit(uint64_t seed, uint64_t counter) {
  PhiloxBlock r = philox4x32_10({uint32_t(counter), uint32_t(counter >> 32), 0, 0},
                                {uint32_t(seed), uint32_t(seed >> 32)});
  return double((uint64_t(r[0]) >> 5) * 67108864 + (r[1] >> 6)) / 9007199254740992.0;
}

TEST(Random, UniformElementsFollowTheirCounters) {
  Generator g(0x1234'5678'9abc'def0ull, 1000);
  Tensor x = uniform({3, 5}, -2, 3, g, DType::f64);
  std::vector<double> v = x.to_vector<double>();
  for (size_t i = 0; i < v.size(); ++i)
    EXPECT_EQ(v[i], -2 + 5 * expected_unit(0x1234'5678'9abc'def0ull, 1000 + i)) << i;
  EXPECT_EQ(g.offset(), 1015u);
}

TEST(Random, DrawsDependOnlyOnSeedAndCounters) {
  Generator a(7), b(7), c(8);
  Tensor whole = randn({10}, a);
  Tensor first = randn({4}, b), second = randn({2, 3}, b);
  EXPECT_EQ(whole.to_vector<float>(), concat({first, second.reshape({6})}).to_vector<float>());
  EXPECT_EQ(a.offset(), 10u);
  EXPECT_EQ(b.offset(), 10u);
  EXPECT_NE(randn({10}, c).to_vector<float>(), whole.to_vector<float>());
  EXPECT_NE(randn({10}, a).to_vector<float>(), whole.to_vector<float>()) << "offset advanced";
}

TEST(Random, SameBitsForEveryThreadCountAndMode) {
  auto draw = [] {
    Generator g(99);
    std::vector<float> out = rand({100000}, g).to_vector<float>();
    for (float v : randn({100000}, g).to_vector<float>()) out.push_back(v);
    for (float v : bernoulli({100000}, 0.3, g, DType::f32).to_vector<float>()) out.push_back(v);
    return out;
  };
  int saved = num_threads();
  set_num_threads(1);
  std::vector<float> expect = draw();
  for (int threads : {2, 7}) {
    set_num_threads(threads);
    EXPECT_EQ(draw(), expect) << threads << " threads";
  }
  set_num_threads(saved);
  EagerModeGuard debug(EagerMode::debug);
  EXPECT_EQ(draw(), expect) << "debug mode";
}

// Element i of normal(mean, std), recomputed here by the documented
// Box-Muller formula with libm's log and cos.
double expected_normal(uint64_t seed, uint64_t counter, double mean, double stddev) {
  PhiloxBlock r = philox_block(seed, counter);
  double radius = std::sqrt(-2 * std::log(1 - unit_double(r[0], r[1])));
  return mean + stddev * radius * std::cos(2 * 3.141592653589793 * unit_double(r[2], r[3]));
}

// The kernel's vectorised log and cos are within an ulp of libm's, so in
// f64 the draws agree to a few ulps, and rounded to f32 or bf16 they are
// the same bits but for values within that distance of a rounding boundary
// (some 1e-8 of them).
TEST(Random, NormalElementsFollowTheirCounters) {
  const uint64_t seed = 0x5eed'0000'1234ull, offset = 77;
  const int64_t n = 1 << 20;
  Generator g64(seed, offset), g32(seed, offset), g16(seed, offset);
  std::vector<double> d = normal({n}, 0.5, 2, g64, DType::f64).to_vector<double>();
  std::vector<float> f = normal({n}, 0.5, 2, g32).to_vector<float>();
  std::vector<double> b = normal({n}, 0.5, 2, g16, DType::bf16).to_vector<double>();
  int64_t f32_differ = 0, bf16_differ = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double expect = expected_normal(seed, offset + uint64_t(i), 0.5, 2);
    ASSERT_NEAR(d[size_t(i)], expect, 1e-15 * (1 + std::abs(expect))) << i;
    f32_differ += f[size_t(i)] != float(expect);
    bf16_differ += b[size_t(i)] != double(float(bf16(float(expect))));  // as kernels store bf16
  }
  EXPECT_LE(f32_differ, 2) << "of " << n;
  EXPECT_LE(bf16_differ, 2) << "of " << n;
}

struct Moments {
  double mean = 0, sd = 0, min = INFINITY, max = -INFINITY;
};
Moments moments(const std::vector<double>& v) {
  Moments m;
  for (double x : v) m.mean += x, m.min = std::min(m.min, x), m.max = std::max(m.max, x);
  m.mean /= double(v.size());
  for (double x : v) m.sd += (x - m.mean) * (x - m.mean);
  m.sd = std::sqrt(m.sd / double(v.size()));
  return m;
}

// 1e6 samples: the standard error of the mean is ~1e-3 of the std, so the
// bounds below are over 5 standard errors wide.
TEST(Random, UniformMoments) {
  Generator g(1);
  for (DType t : {DType::f32, DType::f64, DType::bf16, DType::f16}) {
    Moments m = moments(uniform({1000, 1000}, 2, 6, g, t).to_vector<double>());
    EXPECT_NEAR(m.mean, 4, 0.01) << dtype_name(t);
    EXPECT_NEAR(m.sd, 4 / std::sqrt(12.0), 0.01) << dtype_name(t);
    EXPECT_GE(m.min, 2) << dtype_name(t);
    EXPECT_LT(m.max, 6) << dtype_name(t) << ": high is excluded even after rounding";
  }
}

TEST(Random, NormalMoments) {
  Generator g(2);
  for (DType t : {DType::f32, DType::f64, DType::bf16}) {
    std::vector<double> v = normal({1000000}, -1, 3, g, t).to_vector<double>();
    Moments m = moments(v);
    EXPECT_NEAR(m.mean, -1, 0.015) << dtype_name(t);
    EXPECT_NEAR(m.sd, 3, 0.015) << dtype_name(t);
    double within = 0;  // P(|z| < 1) = 0.6827
    for (double x : v) within += std::abs(x + 1) < 3;
    EXPECT_NEAR(within / double(v.size()), 0.6827, 0.003) << dtype_name(t);
  }
}

TEST(Random, BernoulliFrequency) {
  Generator g(3);
  std::vector<bool> b = bernoulli({1000000}, 0.3, g).to_vector<bool>();
  double ones = 0;
  for (bool x : b) ones += x;
  EXPECT_NEAR(ones / double(b.size()), 0.3, 0.003);
  EXPECT_EQ(moments(bernoulli({1000}, 0, g, DType::f32).to_vector<double>()).max, 0);
  EXPECT_EQ(moments(bernoulli({1000}, 1, g, DType::f32).to_vector<double>()).min, 1);
}

TEST(Random, RejectsBadParameters) {
  Generator g(4);
  EXPECT_THROW(uniform({2}, 1, 1, g), Error);
  EXPECT_THROW(normal({2}, 0, -1, g), Error);
  EXPECT_THROW(randn({2}, g, DType::i32), Error);
  EXPECT_THROW(bernoulli({2}, 1.5, g), Error);
  EXPECT_THROW(rand({-1}, g), Error);
  EXPECT_EQ(g.offset(), 0u) << "rejected draws use no counters";
  EXPECT_THROW(dropout(ones({2}), -0.1, 0, 0), Error);
  EXPECT_THROW(dropout(ones({2}, DType::i64), 0.5, 0, 0), Error);
}

TEST(Dropout, ZeroesAboutPAndScalesTheRest) {
  Tensor x = full({200000}, 2.0);
  Generator g(5);
  std::vector<float> y = dropout(x, 0.25, g).to_vector<float>();
  EXPECT_EQ(g.offset(), 200000u);
  double zeros = 0;
  for (float v : y) {
    if (v == 0) ++zeros;
    else EXPECT_FLOAT_EQ(v, 2 / 0.75f);
  }
  EXPECT_NEAR(zeros / double(y.size()), 0.25, 0.005);
  EXPECT_EQ(dropout(x, 0, g).to_vector<float>(), x.to_vector<float>());
  EXPECT_EQ(moments(dropout(x, 1, g).to_vector<double>()).max, 0);
}

TEST(Dropout, GradientUsesTheForwardMask) {
  Tensor x = test::random_tensor({50, 40}, DType::f64, 6, 0.5, 1.5);  // no zeros
  auto f = value_and_grad([](const std::vector<Tensor>& a) {
    Tensor y = dropout(a[0], 0.4, 11, 22);
    return std::vector<Tensor>{sum(y), y};
  });
  ValueAndGrad r = f({x});
  std::vector<double> y = r.values[1].to_vector<double>(), grad = r.grads[0].to_vector<double>();
  for (size_t i = 0; i < y.size(); ++i) EXPECT_EQ(grad[i], y[i] == 0 ? 0 : 1 / 0.6) << i;
  // The traced forward drew the same mask as an eager call with the same key.
  EXPECT_EQ(dropout(x, 0.4, 11, 22).to_vector<double>(), y);
  EXPECT_TRUE(test::check_gradients(
      [](const std::vector<Tensor>& a) { return dropout(a[0], 0.5, 3, 0); },
      {test::random_tensor({4, 3}, DType::f64, 7)}));
}

}  // namespace
}  // namespace kiln
