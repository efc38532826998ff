// 16-bit floating-point storage types. Conversions from float round to
// nearest even, as the hardware and PyTorch do. Usable in CUDA device code
// (generated kernels embed this text): bf16 rounds by the same integer code
// on both, so its bits match; f16 uses _Float16 on the host and PTX's cvt
// on the device, both IEEE round-to-nearest-even.
#pragma once
#include "kiln/base/host_device.h"

#if !defined(__CUDACC_RTC__)
#include <cstring>
#endif

namespace kiln {

KILN_HD inline uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}
KILN_HD inline float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

struct bf16 {
  uint16_t bits = 0;
  bf16() = default;
  KILN_HD explicit bf16(float f) : bits(round(f)) {}
  KILN_HD explicit operator float() const { return bits_float(uint32_t(bits) << 16); }
  KILN_HD static uint16_t round(float f) {
    uint32_t u = float_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return uint16_t(u >> 16);
  }
};

struct f16 {
  uint16_t bits = 0;
  f16() = default;
  KILN_HD explicit f16(float f) {
#if defined(__CUDA_ARCH__)
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(bits) : "f"(f));
#else
    _Float16 h = static_cast<_Float16>(f);  // IEEE round-to-nearest-even
    std::memcpy(&bits, &h, 2);
#endif
  }
  KILN_HD explicit operator float() const {
#if defined(__CUDA_ARCH__)
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(bits));
    return f;
#else
    _Float16 h;
    std::memcpy(&h, &bits, 2);
    return static_cast<float>(h);
#endif
  }
};

}  // namespace kiln
