// Scalar conversions between storage types and the types arithmetic runs in.
// Self-contained (standard headers and half.h only): the fused-kernel code
// generator embeds this text in the C++ it generates, so generated kernels
// convert exactly as the eager kernels do.
#pragma once
#include <type_traits>

#include "kiln/base/half.h"

namespace kiln::cpu {

// The type arithmetic runs in: f32 for 16-bit floats, the type itself otherwise.
template <class T> struct compute_type { using type = T; };
template <> struct compute_type<bf16> { using type = float; };
template <> struct compute_type<f16> { using type = float; };
template <class T> using compute_t = typename compute_type<T>::type;

template <class T>
inline constexpr bool is_half_v = std::is_same_v<T, bf16> || std::is_same_v<T, f16>;

// A stored value in its compute type (exact).
template <class T>
inline compute_t<T> widen(T x) {
  if constexpr (is_half_v<T>) return static_cast<float>(x);
  else return x;
}

// A computed value in the storage type T; 16-bit floats round to nearest even
// (from f64 through f32, as every kiln kernel stores them).
template <class T, class C>
inline T narrow(C v) {
  if constexpr (is_half_v<T>) return T(static_cast<float>(v));
  else return static_cast<T>(v);
}

// What storing v as T and loading it back gives: the value an unfused kernel
// hands to the next one.
template <class T, class C>
inline compute_t<T> round_to(C v) {
  return widen(narrow<T>(v));
}

}  // namespace kiln::cpu
