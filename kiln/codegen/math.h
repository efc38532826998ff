// The math functions of the scalar ops, per target: the C library's on the
// host (exactly std::exp etc., so CPU results are those of the eager
// kernels), CUDA's on the device (expf, exp, ...; not correctly rounded
// either, so the two differ in the last bits). Self-contained, no CUDA
// includes: embedded in generated code for both targets.
#pragma once
#include "kiln/base/host_device.h"

#if !defined(__CUDACC_RTC__)
#include <cmath>
#endif

namespace kiln::codegen::math {

#if defined(__CUDA_ARCH__)
#define KILN_MATH_UNARY(name)                                       \
  KILN_HD inline float name(float x) { return ::name##f(x); }       \
  KILN_HD inline double name(double x) { return ::name(x); }
#define KILN_MATH_BINARY(name)                                                  \
  KILN_HD inline float name(float x, float y) { return ::name##f(x, y); }       \
  KILN_HD inline double name(double x, double y) { return ::name(x, y); }
#else
#define KILN_MATH_UNARY(name)                                  \
  KILN_HD inline float name(float x) { return std::name(x); }  \
  KILN_HD inline double name(double x) { return std::name(x); }
#define KILN_MATH_BINARY(name)                                             \
  KILN_HD inline float name(float x, float y) { return std::name(x, y); }  \
  KILN_HD inline double name(double x, double y) { return std::name(x, y); }
#endif

KILN_MATH_UNARY(exp)
KILN_MATH_UNARY(log)
KILN_MATH_UNARY(sqrt)
KILN_MATH_UNARY(tanh)
KILN_MATH_UNARY(sin)
KILN_MATH_UNARY(cos)
KILN_MATH_UNARY(erf)
KILN_MATH_BINARY(pow)
#undef KILN_MATH_UNARY
#undef KILN_MATH_BINARY

// One rounding of x * y + z.
KILN_HD inline float fma(float x, float y, float z) {
#if defined(__CUDA_ARCH__)
  return ::fmaf(x, y, z);
#else
  return std::fma(x, y, z);
#endif
}
KILN_HD inline double fma(double x, double y, double z) {
#if defined(__CUDA_ARCH__)
  return ::fma(x, y, z);
#else
  return std::fma(x, y, z);
#endif
}

}  // namespace kiln::codegen::math
