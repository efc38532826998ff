// Test inputs that exercise elementwise math and comparisons, and a
// tensor's raw element bytes for bit-for-bit comparisons.
#pragma once
#include <cstdint>
#include <vector>

#include "kiln/runtime/tensor.h"

namespace kiln::test {

// Values spread over [-3, 3] (negative, near zero, large for exp), with
// exact ties (every 7th is 0.5) for comparisons and maximum; integers are
// the values times 10, bools their signs. On the CPU.
Tensor spread_tensor(DType t, const Shape& s, uint32_t seed);

// The bytes of a tensor's elements (one byte per bool), copied to the host.
std::vector<uint8_t> element_bytes(const Tensor& t);

}  // namespace kiln::test
