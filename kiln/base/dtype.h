// Element types of tensors.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "kiln/base/half.h"

namespace kiln {

enum class DType : uint8_t { f32, bf16, f16, f64, i32, i64, b8 };

inline constexpr DType kAllDTypes[] = {DType::f32, DType::bf16, DType::f16, DType::f64,
                                       DType::i32, DType::i64,  DType::b8};

size_t itemsize(DType t);
const char* dtype_name(DType t);  // "f32", "bf16", "f16", "f64", "i32", "i64", "bool"
DType parse_dtype(std::string_view name);  // throws kiln::Error naming the valid names
inline bool is_floating(DType t) {
  return t == DType::f32 || t == DType::bf16 || t == DType::f16 || t == DType::f64;
}
inline bool is_integer(DType t) { return t == DType::i32 || t == DType::i64; }

template <class T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::f32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::f64; };
template <> struct dtype_of<bf16> { static constexpr DType value = DType::bf16; };
template <> struct dtype_of<f16> { static constexpr DType value = DType::f16; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::i32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::i64; };
template <> struct dtype_of<bool> { static constexpr DType value = DType::b8; };

// Calls f(T{}) with the C++ type that stores `t`.
template <class F>
decltype(auto) visit_dtype(DType t, F&& f) {
  switch (t) {
    case DType::f32: return f(float{});
    case DType::bf16: return f(bf16{});
    case DType::f16: return f(f16{});
    case DType::f64: return f(double{});
    case DType::i32: return f(int32_t{});
    case DType::i64: return f(int64_t{});
    case DType::b8: return f(bool{});
  }
  return f(float{});
}

}  // namespace kiln
