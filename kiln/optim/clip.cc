#include "kiln/optim/clip.h"

#include "kiln/base/error.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"

namespace kiln::optim {

DType norm_dtype(const std::vector<Tensor>& grads) {
  for (const auto& g : grads)
    if (g.dtype() == DType::f64) return DType::f64;
  return DType::f32;
}

Tensor slice_norms(const Tensor& g, DType dtype, int64_t batch_dims) {
  KILN_CHECK(g.defined(), "global_norm: an undefined gradient");
  KILN_CHECK(batch_dims >= 0 && batch_dims <= g.rank(),
             "slice_norms: ", batch_dims, " batch dims of a rank-", g.rank(), " gradient");
  Tensor x = g.dtype() == dtype ? g : g.to(dtype);
  if (batch_dims == 0) return sqrt(sum(square(x))).reshape({1});
  if (batch_dims == g.rank()) return sqrt(square(x)).reshape({-1});  // stacked scalars
  std::vector<int64_t> axes;
  for (int64_t d = batch_dims; d < g.rank(); ++d) axes.push_back(d);
  return sqrt(sum(square(x), axes)).reshape({-1});
}

Tensor norm_of_norms(const std::vector<Tensor>& norms) {
  KILN_CHECK(!norms.empty(), "global_norm: no gradients");
  return sqrt(sum(square(concat(norms, 0))));
}

Tensor global_norm(const std::vector<Tensor>& grads) {
  // As torch: the norm of the vector of per-gradient norms.
  DType dt = norm_dtype(grads);
  std::vector<Tensor> norms;
  for (const auto& g : grads) norms.push_back(slice_norms(g, dt));
  return norm_of_norms(norms);
}

ClipResult clip_grad_norm(std::vector<Tensor> grads, double max_norm) {
  Tensor norm = global_norm(grads);
  return clip_to_norm(std::move(grads), norm, max_norm);
}

ClipResult clip_to_norm(std::vector<Tensor> grads, const Tensor& norm, double max_norm) {
  ClipResult out;
  out.norm = norm;
  if (max_norm <= 0) {
    out.grads = std::move(grads);
    return out;
  }
  Tensor coef = minimum(max_norm / (out.norm + 1e-6), scalar(1.0, out.norm.dtype(), out.norm.device()));
  for (Tensor& g : grads) {
    out.grads.push_back(g * (coef.dtype() == g.dtype() ? coef : coef.to(g.dtype())));
    g = Tensor();
  }
  return out;
}

}  // namespace kiln::optim
