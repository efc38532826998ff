// The rms_norm op (RMSNorm): one IR op whose composite is built from the
// basic ops; the composite runs wherever no fused kernel exists and the
// fused kernel is tested against it. Its vjp rule calls the fused backward
// op rms_norm_backward (kiln/ops/norm_rope_backward.cc). Computes in
// ops::compute_dtype and rounds once.
#pragma once
#include "kiln/runtime/tensor.h"

namespace kiln {

// y = x * rsqrt(mean(x^2 over the last axis) + eps) * weight, weight being
// [x.dim(-1)] of x's dtype. HF's LlamaRMSNorm rounds the normalised x to
// bf16 before multiplying by weight; here the product rounds once.
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps);
// The same from the basic ops (the op's composite), so autograd
// differentiates through them rather than the op's fused backward.
Tensor rms_norm_composite(const Tensor& x, const Tensor& weight, double eps);

}  // namespace kiln
