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
// The pieces of global_norm, for gradients kept in another layout (layers
// stacked [L, ...]): the dtype norms are taken in (f64 if any gradient is
// f64, else f32); the norms of g's slices along its first `batch_dims` dims
// (a [1] vector when 0), each exactly the norm of that slice alone; and
// the norm of the concatenated per-gradient norms, in parameter order.
DType norm_dtype(const std::vector<Tensor>& grads);
Tensor slice_norms(const Tensor& g, DType dtype, int64_t batch_dims = 0);
Tensor norm_of_norms(const std::vector<Tensor>& norms);
ClipResult clip_grad_norm(std::vector<Tensor> grads, double max_norm);
// clip_grad_norm with the norm given: for gradients sharded over ranks,
// whose global norm combines every rank's part. Gradients moved in (to
// either) are dropped one by one as their clipped copies are issued, so in
// eager mode each is freed then, as a program's memory plan frees it.
ClipResult clip_to_norm(std::vector<Tensor> grads, const Tensor& norm, double max_norm);

}  // namespace kiln::optim
