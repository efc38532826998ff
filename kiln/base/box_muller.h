// Normal draws from Philox blocks by Box-Muller, in code every backend
// shares. The double log and cos below use only IEEE-exact operations (+ - *
// /, fma, sqrt), selects and bit moves, so they give the same bits on the
// CPU (where a loop over elements vectorises: glibc's std::log and std::cos
// are calls, which keep it scalar, 30 ns an element) and on CUDA (built
// with --fmad=false). Both are within one ulp, as glibc's are (measured:
// log 0.83 ulp, cos 0.71, tests/base/box_muller_test.cc), so after
// rounding to f32 or bf16 a draw equals the libm formula's but for the rare
// value on a rounding boundary (tests/ops/random_test.cc counts them).
#pragma once
#include "kiln/base/host_device.h"
#include "kiln/base/philox.h"

#include <cmath>
#include <cstring>

namespace kiln::box_muller {

// Plain std:: calls: nvcc has device versions of these (memcpy of 8 bytes
// is a register move).
KILN_HD KILN_FORCE_INLINE int64_t bits_of(double x) {
  int64_t b;
  std::memcpy(&b, &x, 8);
  return b;
}
KILN_HD KILN_FORCE_INLINE double double_of(int64_t b) {
  double x;
  std::memcpy(&x, &b, 8);
  return x;
}

// pi and 2 / pi in double (std::numbers, which device code cannot read).
inline constexpr double kPi = 0x1.921fb54442d18p+1, kTwoOverPi = 0x1.45f306dc9c883p-1;

// c0 x^n + c1 x^(n-1) + ... + cn (recursive: a loop would stop the caller's
// loop from vectorising).
KILN_HD KILN_FORCE_INLINE double horner(double, double c) { return c; }
template <class... C>
KILN_HD KILN_FORCE_INLINE double horner(double x, double c0, double c1, C... c) {
  return horner(x, std::fma(c0, x, c1), c...);
}

// log(x) for positive normal x (the draws take it of [2^-53, 1]).
// x = 2^e (1 + f) with 1 + f in [sqrt(1/2), sqrt(2)) (f exact);
// log(1 + f) = 2 atanh(s), s = f / (2 + f), |s| < 0.172, written as
// f - f^2/2 + s (f^2/2 + R) with R = sum 2 s^2k / (2k + 1) so that the
// rounding errors fall on the small terms; ln 2 in two parts, e ln2_hi exact.
KILN_HD KILN_FORCE_INLINE double log_f64(double x) {
  const int64_t sqrt_half = 0x3fe6a09e667f3bcd;
  const int64_t off = bits_of(x) - sqrt_half;
  const double e = double(off >> 52);
  const double f = double_of((off & 0x000fffffffffffff) + sqrt_half) - 1.0;
  const double s = f / (2.0 + f), z = s * s;
  // Ten terms: the eleventh is below 1e-17 of the result.
  const double r = z * horner(z, 2.0 / 21, 2.0 / 19, 2.0 / 17, 2.0 / 15, 2.0 / 13, 2.0 / 11,
                              2.0 / 9, 2.0 / 7, 2.0 / 5, 2.0 / 3);
  const double hfsq = 0.5 * f * f;
  const double ln2_hi = 0x1.62e42fefp-1, ln2_lo = 0x1.473de6af278edp-34;
  return e * ln2_hi - ((hfsq - (s * (hfsq + r) + e * ln2_lo)) - f);
}

// cos(a) for |a| < 2^20 (the draws take it of [0, 2 pi)). a = k pi/2 + x
// with |x| <= pi/4, pi/2 in three parts: a - k p1 is exact, and x is kept
// as x + lo (lo: the rounding error of x and the third part), since an
// error of half an ulp of x alone can be one ulp of the result. Then
// cos(x + lo) = cos x - lo x and sin(x + lo) = sin x + lo cos x by Taylor
// series (the next terms are below 1e-17) and the sign of k's quadrant.
KILN_HD KILN_FORCE_INLINE double cos_f64(double a) {
  // Adding 1.5 * 2^52 rounds to an integer, which then sits in the low
  // mantissa bits (a double -> int cast would block vectorisation).
  const double magic = 0x1.8p52;
  const double t = std::fma(a, kTwoOverPi, magic);
  const double k = t - magic;
  const int64_t q = bits_of(t) - bits_of(magic);
  const double p1 = 0x1.921fb544p+0, p2 = 0x1.0b4611a6p-34, p3 = 0x1.3198a2e037073p-69;
  const double y = std::fma(-k, p1, a);  // exact
  const double x = std::fma(-k, p2, y);
  const double lo = std::fma(-k, p3, std::fma(-k, p2, y - x));
  const double z = x * x;
  const double ps = horner(z, 1.0 / 355687428096000, -1.0 / 1307674368000, 1.0 / 6227020800,
                           -1.0 / 39916800, 1.0 / 362880, -1.0 / 5040, 1.0 / 120, -1.0 / 6);
  const double pc = horner(z, 1.0 / 20922789888000, -1.0 / 87178291200, 1.0 / 479001600,
                           -1.0 / 3628800, 1.0 / 40320, -1.0 / 720, 1.0 / 24);
  const double sin_x = x + std::fma(x * z, ps, lo * std::fma(-0.5, z, 1.0));
  // cos x = 1 - z/2 + z^2 pc: w = 1 - z/2 rounded, and the small terms carry
  // w's rounding error and z's (z_lo), each worth up to a quarter ulp.
  const double hz = 0.5 * z, w = 1.0 - hz, z_lo = std::fma(x, x, -z);
  const double cos_x = w + (((1.0 - w) - hz) + (std::fma(z * z, pc, -lo * x) - 0.5 * z_lo));
  // cos(x + q pi/2): cos x, -sin x, -cos x, sin x.
  const double v = (q & 1) ? sin_x : cos_x;
  return ((q + 1) & 2) ? -v : v;
}

// mean + stddev z for the standard normal z of block r: the cosine branch,
// with 1 - u keeping the logarithm's argument in (0, 1].
KILN_HD KILN_FORCE_INLINE double normal(const PhiloxBlock& r, double mean, double stddev) {
  const double radius = std::sqrt(-2 * log_f64(1 - unit_double(r[0], r[1])));
  const double angle = 2 * kPi * unit_double(r[2], r[3]);
  return mean + stddev * radius * cos_f64(angle);
}

}  // namespace kiln::box_muller
