// The SwiGLU MLP of Llama and Qwen3: down(silu(gate(x)) * up(x)).
#pragma once
#include "kiln/nn/layers.h"

namespace kiln::nn {

class SwiGLU : public Module {
 public:
  SwiGLU(int64_t dim, int64_t hidden_dim, DType dtype = DType::f32);
  Tensor forward(const Tensor& x) const;  // [..., dim] -> [..., dim]
  TensorHook input_hook;  // on x, before the projections read it
  Linear gate_proj, up_proj, down_proj;
};

}  // namespace kiln::nn
