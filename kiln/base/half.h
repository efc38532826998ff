// 16-bit floating-point storage types. Conversions from float round to
// nearest even, as the hardware and PyTorch do.
#pragma once
#include <cstdint>
#include <cstring>

namespace kiln {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

struct bf16 {
  uint16_t bits = 0;
  bf16() = default;
  explicit bf16(float f) : bits(round(f)) {}
  explicit operator float() const { return bits_float(uint32_t(bits) << 16); }
  static uint16_t round(float f) {
    uint32_t u = float_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return uint16_t(u >> 16);
  }
};

struct f16 {
  uint16_t bits = 0;
  f16() = default;
  explicit f16(float f) {
    _Float16 h = static_cast<_Float16>(f);  // IEEE round-to-nearest-even
    std::memcpy(&bits, &h, 2);
  }
  explicit operator float() const {
    _Float16 h;
    std::memcpy(&h, &bits, 2);
    return static_cast<float>(h);
  }
};

}  // namespace kiln
