#include "kiln/optim/clip.h"

#include "kiln/base/error.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"

namespace kiln::optim {

Tensor global_norm(const std::vector<Tensor>& grads) {
  KILN_CHECK(!grads.empty(), "global_norm: no gradients");
  // As torch: the norm of the vector of per-gradient norms.
  bool f64 = false;
  for (const auto& g : grads) f64 = f64 || g.dtype() == DType::f64;
  DType dt = f64 ? DType::f64 : DType::f32;
  std::vector<Tensor> norms;
  for (const auto& g : grads) {
    KILN_CHECK(g.defined(), "global_norm: an undefined gradient");
    Tensor x = g.dtype() == dt ? g : g.to(dt);
    norms.push_back(sqrt(sum(square(x))).reshape({1}));
  }
  return sqrt(sum(square(concat(norms, 0))));
}

ClipResult clip_grad_norm(const std::vector<Tensor>& grads, double max_norm) {
  return clip_to_norm(grads, global_norm(grads), max_norm);
}

ClipResult clip_to_norm(const std::vector<Tensor>& grads, const Tensor& norm, double max_norm) {
  ClipResult out;
  out.norm = norm;
  if (max_norm <= 0) {
    out.grads = grads;
    return out;
  }
  Tensor coef = minimum(max_norm / (out.norm + 1e-6), scalar(1.0, out.norm.dtype()));
  for (const auto& g : grads) out.grads.push_back(g * (coef.dtype() == g.dtype() ? coef : coef.to(g.dtype())));
  return out;
}

}  // namespace kiln::optim
