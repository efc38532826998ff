// Scalar conversions between storage types and the types arithmetic runs in,
// shared by every target: the CPU's eager kernels and interpreter, and the
// code generated for the CPU and for CUDA (which embeds this text), so all
// convert exactly alike. Self-contained: no standard headers under NVRTC.
#pragma once
#include "kiln/base/half.h"
#include "kiln/base/host_device.h"

#if !defined(__CUDACC_RTC__)
#include <cstring>
#endif

namespace kiln::codegen {

template <class A, class B> inline constexpr bool is_same_v = false;
template <class A> inline constexpr bool is_same_v<A, A> = true;

// The type arithmetic runs in: f32 for 16-bit floats, the type itself otherwise.
template <class T> struct compute_type { using type = T; };
template <> struct compute_type<bf16> { using type = float; };
template <> struct compute_type<f16> { using type = float; };
template <class T> using compute_t = typename compute_type<T>::type;

template <class T>
inline constexpr bool is_half_v = is_same_v<T, bf16> || is_same_v<T, f16>;

// A stored value in its compute type (exact).
template <class T>
KILN_HD inline compute_t<T> widen(T x) {
  if constexpr (is_half_v<T>) return static_cast<float>(x);
  else return x;
}

// A computed value in the storage type T; 16-bit floats round to nearest even
// (from f64 through f32, as every kiln kernel stores them).
template <class T, class C>
KILN_HD inline T narrow(C v) {
  if constexpr (is_half_v<T>) return T(static_cast<float>(v));
  else return static_cast<T>(v);
}

// What storing v as T and loading it back gives: the value an unfused kernel
// hands to the next one.
template <class T, class C>
KILN_HD inline compute_t<T> round_to(C v) {
  return widen(narrow<T>(v));
}

// A compute-type value from the low bytes of `bits` (how the code generators
// pass constants, codegen/expr.h).
template <class C>
KILN_HD inline C from_bits(uint64_t bits) {
  if constexpr (is_same_v<C, float>) {
    return bits_float(uint32_t(bits));
  } else if constexpr (is_same_v<C, double>) {
#if defined(__CUDA_ARCH__)
    return __longlong_as_double((long long)bits);
#else
    double d;
    std::memcpy(&d, &bits, 8);
    return d;
#endif
  } else if constexpr (is_same_v<C, bool>) {
    return (bits & 0xff) != 0;
  } else {
    return C(bits);  // two's complement: the low bytes
  }
}

}  // namespace kiln::codegen
