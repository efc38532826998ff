#include "kiln/nn/mlp.h"

#include "kiln/ops/fused_kernels.h"

namespace kiln::nn {

SwiGLU::SwiGLU(int64_t dim, int64_t hidden_dim, DType dtype)
    : gate_proj(dim, hidden_dim, false, dtype),
      up_proj(dim, hidden_dim, false, dtype),
      down_proj(hidden_dim, dim, false, dtype) {
  register_module("gate_proj", &gate_proj);
  register_module("up_proj", &up_proj);
  register_module("down_proj", &down_proj);
}

Tensor SwiGLU::forward(const Tensor& x) const {
  Tensor in = apply_hook(input_hook, x);
  return down_proj.forward(silu_mul(gate_proj.forward(in), up_proj.forward(in)));
}

}  // namespace kiln::nn
