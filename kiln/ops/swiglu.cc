// The SwiGLU MLP as a plain function of basic ops.
#include "kiln/ops/elementwise.h"
#include "kiln/ops/matmul.h"
#include "kiln/ops/swiglu.h"

namespace kiln {

Tensor swiglu(const Tensor& x, const Tensor& w_gate, const Tensor& w_up, const Tensor& w_down) {
  Tensor hidden = silu(matmul(x, w_gate, false, true)) * matmul(x, w_up, false, true);
  return matmul(hidden, w_down, false, true);
}

}  // namespace kiln
