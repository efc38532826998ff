// The SwiGLU MLP as a plain function of basic ops, not an op.
#pragma once
#include "kiln/runtime/tensor.h"

namespace kiln {

// (silu(x @ w_gate^T) * (x @ w_up^T)) @ w_down^T, with the weights stored as
// Linear weights: w_gate, w_up [F, D], w_down [D, F].
Tensor swiglu(const Tensor& x, const Tensor& w_gate, const Tensor& w_up, const Tensor& w_down);

}  // namespace kiln
