// The double log and cos of the normal draws (kiln/base/box_muller.h)
// against long double references (glibc's logl and cosl, 11 more bits): the
// error in ulps of the double result, over the inputs the draws give them
// and over the hard cases (results near 0: log near 1, cos near its zeros).
#include "kiln/base/box_muller.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <numbers>
#include <random>
#include <vector>

namespace kiln::box_muller {
namespace {

// |got - exact| in units of the double spacing at exact.
double ulp_error(double got, long double exact) {
  if (got == static_cast<double>(exact)) return 0;
  const int e = exact == 0 ? -1022 : std::max(std::ilogb(exact), -1022);
  return double(std::fabs(static_cast<long double>(got) - exact) / std::ldexp(1.0L, e - 52));
}

template <double (*F)(double), long double (*Exact)(long double)>
void expect_within(const std::vector<double>& xs, double bound, const char* name) {
  std::vector<double> y(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) y[i] = F(xs[i]);  // vectorised, as in the kernel
  double worst = 0, at = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double err = ulp_error(y[i], Exact(static_cast<long double>(xs[i])));
    if (!(err <= worst)) worst = err, at = xs[i];
  }
  EXPECT_LE(worst, bound) << name << " at x = " << at;
  std::printf("%s: worst error %.3f ulp at x = %a over %zu inputs\n", name, worst, at, xs.size());
}

long double logl_ref(long double x) { return std::log(x); }
long double cosl_ref(long double x) { return std::cos(x); }

// The draws' log arguments, 1 - u for u = k 2^-53: every k up to 2^16 (the
// results nearest 0), then random k; powers of two and their neighbours.
TEST(BoxMuller, LogIsWithinOneUlp) {
  std::vector<double> xs;
  for (int64_t k = 0; k < (1 << 16); ++k) xs.push_back(1 - double(k) * 0x1p-53);
  std::mt19937_64 rng(1);
  for (int i = 0; i < 2000000; ++i) xs.push_back(1 - double(rng() >> 11) * 0x1p-53);
  for (int e = 0; e <= 53; ++e)
    for (double d : {-2.0, -1.0, 0.0, 1.0, 2.0})
      if (double x = std::ldexp(1.0, -e) * (1 + d * 0x1p-52); x <= 1) xs.push_back(x);
  for (double d = -8; d <= 8; ++d) xs.push_back(std::sqrt(0.5) * (1 + d * 0x1p-52));
  expect_within<log_f64, logl_ref>(xs, 1.0, "log");
}

// The draws' cos arguments, 2 pi u: random u, every multiple of pi/4 and
// the doubles around each multiple of pi/2 (results near 0).
TEST(BoxMuller, CosIsWithinOneUlp) {
  std::vector<double> xs;
  std::mt19937_64 rng(2);
  for (int i = 0; i < 2000000; ++i) xs.push_back(2 * std::numbers::pi * double(rng() >> 11) * 0x1p-53);
  for (int k = 0; k <= 8; ++k) {
    double x = k * std::numbers::pi / 4;
    for (int d = 0; d < 64; ++d, x = std::nextafter(x, 10.0)) xs.push_back(x);
    x = k * std::numbers::pi / 4;
    for (int d = 0; d < 64; ++d, x = std::nextafter(x, -10.0)) xs.push_back(x);
  }
  expect_within<cos_f64, cosl_ref>(xs, 1.0, "cos");
}

}  // namespace
}  // namespace kiln::box_muller
