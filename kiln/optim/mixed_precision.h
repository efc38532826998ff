// Mixed precision policy (FSDP2's MixedPrecisionPolicy): parameters are
// kept as f32 master weights (and AdamW's m, v are f32); each step casts the
// masters to `param_dtype` for the forward/backward (bf16 matmuls with f32
// accumulation), and the gradients come back through the cast's vjp in the
// masters' dtype, so clipping, the optimizer update and checkpoints all see
// f32. With param_dtype f32 the casts are identities and vanish.
//
// Usage with a model built in param_dtype (e.g. CausalLM(config, bf16)):
//   auto vg = kiln::value_and_grad([&](const std::vector<Tensor>& masters) {
//     nn::ParameterScope scope(model, policy.compute_params(masters));
//     return std::vector<Tensor>{model.loss(ids, targets, options)};
//   });
//   auto out = vg(masters);            // out.grads are f32
//   masters = adamw.update(masters, clip_grad_norm(out.grads, 1).grads, state, lr).params;
#pragma once
#include <string_view>
#include <vector>

#include "kiln/runtime/tensor.h"

namespace kiln::optim {

struct MixedPrecisionPolicy {
  DType param_dtype = DType::f32;   // compute dtype of forward/backward
  DType master_dtype = DType::f32;  // stored weights, gradients, optimizer state

  // "f32"/"float32", "bf16"/"bfloat16", "f16"/"float16" (compute);
  // anything else is a kiln::Error listing them.
  static MixedPrecisionPolicy from_name(std::string_view param_dtype);

  // Masters cast to param_dtype (the same tensors when they match).
  std::vector<Tensor> compute_params(const std::vector<Tensor>& masters) const;
  // Initial masters from a model's parameters (cast to master_dtype).
  std::vector<Tensor> master_params(const std::vector<Tensor>& params) const;
};

}  // namespace kiln::optim
