// Matrix products.
#pragma once
#include "kiln/runtime/tensor.h"

namespace kiln {

// a @ b over the last two dims, as torch.matmul for operands of rank >= 2:
// leading (batch) dims broadcast NumPy-style. transpose_a / transpose_b swap
// an operand's last two dims first, without copying: a Linear weight stored
// [N, K] multiplies as matmul(x, w, false, true). Both inputs share one
// floating dtype; bf16/f16 products accumulate in f32.
Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a = false, bool transpose_b = false);

}  // namespace kiln
