// Gradient clipping by global norm, as torch.nn.utils.clip_grad_norm_:
//   norm = sqrt(sum_i ||g_i||^2)   (each ||g_i|| in f32, f64 for f64 grads)
//   g_i <- g_i * min(1, max_norm / (norm + 1e-6))
// Functional and traceable (no host reads): the norm comes back as a 0-d
// tensor; grads keep their dtypes. max_norm <= 0 computes the norm only.
#pragma once
#include <vector>

#include "kiln/runtime/tensor.h"

namespace kiln::optim {

struct ClipResult {
  std::vector<Tensor> grads;
  Tensor norm;  // 0-d f32 (f64 when the grads are f64): the norm before clipping
};

Tensor global_norm(const std::vector<Tensor>& grads);
ClipResult clip_grad_norm(const std::vector<Tensor>& grads, double max_norm);
// clip_grad_norm with the norm given: for gradients sharded over ranks,
// whose global norm combines every rank's part.
ClipResult clip_to_norm(const std::vector<Tensor>& grads, const Tensor& norm, double max_norm);

}  // namespace kiln::optim
