// Math functions written branch-free so that kernel inner loops calling them
// vectorise (std::exp does not without -ffast-math).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace kiln::cpu {

// exp for f32 within 1 ulp, with IEEE results for +-inf, NaN, overflow and
// (gradual) underflow. exp(x) = 2^n * exp(r), n = round(x / ln 2), |r| <= ln2/2,
// exp(r) by the Cephes polynomial; 2^n is applied in two halves so that
// n in [-150, 128] needs no special cases.
inline float exp_f32(float x) {
  float c = std::min(std::max(x, -104.0f), 89.0f);
  // Adding 1.5 * 2^23 rounds to an integer, which then sits in the low
  // mantissa bits (floor and float->int casts would block vectorisation).
  const float magic = 12582912.0f;
  float t = std::fma(c, 1.44269504088896341f, magic);
  float n = t - magic;
  float r = std::fma(n, -0.693359375f, c);  // ln 2 in two parts (Cody-Waite)
  r = std::fma(n, 2.12194440e-4f, r);
  float p = 1.9875691500e-4f;
  p = std::fma(p, r, 1.3981999507e-3f);
  p = std::fma(p, r, 8.3334519073e-3f);
  p = std::fma(p, r, 4.1665795894e-2f);
  p = std::fma(p, r, 1.6666665459e-1f);
  p = std::fma(p, r, 5.0000001201e-1f);
  float y = std::fma(p * r, r, r) + 1.0f;
  int32_t tb, mb;
  std::memcpy(&tb, &t, 4);
  std::memcpy(&mb, &magic, 4);
  int32_t ni = tb - mb, n1 = ni >> 1, n2 = ni - n1;
  int32_t b1 = (n1 + 127) << 23, b2 = (n2 + 127) << 23;
  float s1, s2;
  std::memcpy(&s1, &b1, 4);
  std::memcpy(&s2, &b2, 4);
  y = y * s1 * s2;
  return x != x ? x : y;
}

// exp in the type's own precision: the fast f32 one, std::exp for f64.
inline float fast_exp(float x) { return exp_f32(x); }
inline double fast_exp(double x) { return std::exp(x); }

}  // namespace kiln::cpu
