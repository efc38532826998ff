// Philox4x32-10 (Salmon et al., "Parallel Random Numbers: As Easy as 1, 2,
// 3", SC11): a counter-based generator. The output is a pure function of a
// 128-bit counter and a 64-bit key, so any element of a random tensor can be
// computed alone, on any thread or device, and always gives the same bits.
// KILN_HD: CUDA kernels draw the same stream (plain arrays, no std:: calls).
#pragma once
#include <cstdint>

#include "kiln/base/host_device.h"

namespace kiln {

struct PhiloxBlock {
  uint32_t w[4];
  KILN_HD constexpr uint32_t operator[](int i) const { return w[i]; }
  friend constexpr bool operator==(const PhiloxBlock&, const PhiloxBlock&) = default;
};

struct PhiloxKey {
  uint32_t w[2];
};

KILN_HD constexpr PhiloxBlock philox4x32_10(PhiloxBlock ctr, PhiloxKey key) {
  constexpr uint32_t kM0 = 0xD2511F53, kM1 = 0xCD9E8D57;  // round multipliers
  constexpr uint32_t kW0 = 0x9E3779B9, kW1 = 0xBB67AE85;  // key schedule (Weyl) increments
  for (int round = 0; round < 10; ++round) {
    if (round > 0) key = {{key.w[0] + kW0, key.w[1] + kW1}};
    uint64_t p0 = uint64_t(kM0) * ctr.w[0], p1 = uint64_t(kM1) * ctr.w[2];
    ctr = {{uint32_t(p1 >> 32) ^ ctr.w[1] ^ key.w[0], uint32_t(p1),
            uint32_t(p0 >> 32) ^ ctr.w[3] ^ key.w[1], uint32_t(p0)}};
  }
  return ctr;
}

// kiln's use of Philox: element i of a random op with (seed, offset) is
// drawn from the block at counter offset + i (low word first, the upper 64
// counter bits zero) under the key seed (low word first).
KILN_HD constexpr PhiloxBlock philox_block(uint64_t seed, uint64_t counter) {
  return philox4x32_10({{uint32_t(counter), uint32_t(counter >> 32), 0, 0}},
                       {{uint32_t(seed), uint32_t(seed >> 32)}});
}

// A double in [0, 1) from 53 random bits of two words (a gives the high 27).
KILN_HD constexpr double unit_double(uint32_t a, uint32_t b) {
  return double((uint64_t(a >> 5) << 26) | (b >> 6)) * 0x1.0p-53;
}

}  // namespace kiln
