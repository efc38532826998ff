// The host's f32 exp, log, tanh and erf (codegen/math.h makes them the
// ones every CPU path calls). Written branch-free, with selects in place of
// branches and bit operations in place of frexp/ldexp, so that loops calling
// them vectorise at any width (std::expf etc. do not without -ffast-math).
// Without AVX-512's masks the compiler if-converts the selects only under
// -fno-trapping-math, which kiln's code and the generated code are built with.
// Only IEEE-exact operations (+ - * /, fma, min/max, bit moves) are used, so
// each lane's result is the same bits scalar, SSE, AVX2 or AVX-512, with or
// without a hardware FMA.
//
// Error bounds, measured over every float (tests/backend/vmath_test.cc):
// exp 1.03 ulp, log 0.91, tanh 1.33, erf 1.22 (elementwise_ops.h's sigmoid
// on exp_f32: 2.49); all give IEEE special values (+-0, +-inf, NaN,
// subnormals, overflow, underflow). The polynomials come from scripts/fit_vmath.py.
//
// Self-contained: the code generators embed this text. Host only: device
// code keeps its target's own functions (codegen/math.h).
#pragma once
#include "kiln/base/host_device.h"

#if !defined(__CUDA_ARCH__)
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace kiln::codegen::vmath {

KILN_FORCE_INLINE int32_t bits_of(float x) {
  int32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}
KILN_FORCE_INLINE float float_of(int32_t b) {
  float x;
  std::memcpy(&x, &b, 4);
  return x;
}

// Horner's rule, one rounding per step: c0 x^n + c1 x^(n-1) + ... + cn.
// Recursive rather than a loop: an inner loop stops the caller's loop from
// vectorising.
KILN_FORCE_INLINE float horner(float, float c) { return c; }
template <class... C>
KILN_FORCE_INLINE float horner(float x, float c0, float c1, C... c) {
  return horner(x, std::fma(c0, x, c1), c...);
}

// exp(x) = 2^n * exp(r), n = round(x / ln 2), |r| <= ln2/2, exp(r) by the
// Cephes polynomial; 2^n is applied in two halves so that n in [-150, 128]
// needs no special cases (overflow to inf, gradual underflow to 0).
KILN_FORCE_INLINE float exp_f32(float x) {
  // Below -104 (masked scores: -inf) the result is 0, e^-104 being under half
  // the least subnormal. Scaled down to it from c = -104, the last product
  // is subnormal, which x86 finishes in microcode, 7x slower: such inputs
  // compute from 0 instead and select the 0.
  const bool under = x < -104.0f;
  float c = under ? 0.0f : std::min(x, 89.0f);
  // Adding 1.5 * 2^23 rounds to an integer, which then sits in the low
  // mantissa bits (floor and float->int casts would block vectorisation).
  const float magic = 12582912.0f;
  float t = std::fma(c, 1.44269504088896341f, magic);
  float n = t - magic;
  float r = std::fma(n, -0.693359375f, c);  // ln 2 in two parts (Cody-Waite)
  r = std::fma(n, 2.12194440e-4f, r);
  const float p = horner(r, 1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                         4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f);
  float y = std::fma(p * r, r, r) + 1.0f;
  int32_t ni = bits_of(t) - bits_of(magic), n1 = ni >> 1, n2 = ni - n1;
  y = y * float_of((n1 + 127) << 23) * float_of((n2 + 127) << 23);
  return x != x ? x : (under ? 0.0f : y);
}

// log(x) = e ln2 + log(1 + f), x = 2^e (1 + f), 1 + f in [sqrt(1/2), sqrt(2));
// log(1 + f) = f - f^2/2 + f^3 Q(f).
KILN_FORCE_INLINE float log_f32(float x) {
  const float inf = std::numeric_limits<float>::infinity();
  // Subnormals are scaled into the normal range first (exactly).
  const bool tiny = x < 0x1p-126f;
  // Offset by the bits of sqrt(1/2), the exponent field counts e from there
  // and the mantissa field plus that offset is 1 + f.
  // (In unsigned arithmetic: for x < 0, whose result is NaN anyway, the
  // signed difference would overflow.)
  const int32_t off = int32_t(uint32_t(bits_of(x * (tiny ? 0x1p23f : 1.0f))) - 0x3f3504f3u);
  const float e = float((off >> 23) - (tiny ? 23 : 0));
  const float f = float_of((off & 0x007fffff) + 0x3f3504f3) - 1.0f;  // exact
  const float f2 = f * f;
  const float q = horner(f, -0.0763443f, 0.1276155f, -0.13160194f, 0.14201762f, -0.16623357f,
                         0.20001227f, -0.25000823f, 0.3333333f);
  const float l = f + std::fma(f2 * f, q, -0.5f * f2);
  float y = std::fma(e, 0.693359375f, std::fma(e, -2.12194440e-4f, l));
  y = x == inf ? inf : y;
  y = x == 0 ? -inf : y;
  y = x < 0 ? std::numeric_limits<float>::quiet_NaN() : y;
  return x != x ? x : y;
}

// tanh(|x|) = a + a^3 P(a^2) for a = |x| < 0.625, else 1 - 2 / (exp(2a) + 1)
// (exp overflows to inf past a = 44.5: the result is 1); the sign of x last,
// which also keeps -0.
KILN_FORCE_INLINE float tanh_f32(float x) {
  const float a = std::fabs(x), z = a * a;
  const float p = horner(z, -0.005717037f, 0.020650579f, -0.053743497f, 0.13331491f,
                         -0.33333284f);
  const float small = std::fma(a * z, p, a);
  const float large = 1.0f - 2.0f / (exp_f32(a + a) + 1.0f);
  return std::copysign(a < 0.625f ? small : large, x);  // NaN takes `large`: NaN
}

// erf(|x|) = a + a P(a^2) for a = |x| < 1, else 1 - exp(R(a - 1)) with
// R ~ log(erfc); a is clamped to 4, past which erf rounds to 1. The sign of
// x last.
KILN_FORCE_INLINE float erf_f32(float x) {
  const float a = std::fabs(x);
  const float p = horner(a * a, 7.889119e-05f, -0.0008020841f, 0.005189535f, -0.026854444f,
                         0.112836f, -0.37612626f, 0.12837917f);
  const float u = std::min(a, 4.0f) - 1.0f;  // exact
  const float r = horner(u, -2.1697639e-05f, 0.00028958943f, -0.002012099f, 0.010046589f,
                         -0.041563552f, -0.84310704f, -2.6389675f, -1.8496056f);
  const float small = std::fma(a, p, a);
  const float large = 1.0f - exp_f32(r);
  return std::copysign(a < 1.0f ? small : large, x);  // NaN takes `large`: NaN
}

}  // namespace kiln::codegen::vmath
#endif
