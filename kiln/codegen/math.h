// The math functions of the scalar ops, per target. On the host: vmath.h's
// branch-free f32 exp, log, tanh and erf (which vectorise; every CPU path —
// eager kernels, interpreter, generated code — calls these, so all give the
// same bits), the C library's for the rest and for f64. On the device:
// CUDA's (expf, exp, ...; not correctly rounded either, so host and device
// differ in the last bits). Self-contained, no CUDA includes: embedded in
// generated code for both targets.
#pragma once
#include "kiln/base/host_device.h"
#include "kiln/codegen/vmath.h"

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
#define KILN_MATH_VMATH(name) KILN_MATH_UNARY(name)
#else
#define KILN_MATH_UNARY(name)                                  \
  KILN_HD inline float name(float x) { return std::name(x); }  \
  KILN_HD inline double name(double x) { return std::name(x); }
#define KILN_MATH_BINARY(name)                                             \
  KILN_HD inline float name(float x, float y) { return std::name(x, y); }  \
  KILN_HD inline double name(double x, double y) { return std::name(x, y); }
#define KILN_MATH_VMATH(name)                                              \
  KILN_FORCE_INLINE float name(float x) { return vmath::name##_f32(x); }  \
  inline double name(double x) { return std::name(x); }
#endif

KILN_MATH_VMATH(exp)
KILN_MATH_VMATH(log)
KILN_MATH_VMATH(tanh)
KILN_MATH_VMATH(erf)
KILN_MATH_UNARY(sqrt)
KILN_MATH_UNARY(sin)
KILN_MATH_UNARY(cos)
KILN_MATH_BINARY(pow)
#undef KILN_MATH_VMATH
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
