#include "kiln/nn/layers.h"

#include "kiln/base/error.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/matmul.h"

namespace kiln::nn {

Linear::Linear(int64_t in_features, int64_t out_features, bool has_bias, DType dtype) {
  register_parameter("weight", &weight, zeros({out_features, in_features}, dtype), Init::normal);
  if (has_bias) register_parameter("bias", &bias, zeros({out_features}, dtype), Init::zeros);
}

Tensor Linear::forward(const Tensor& x) const {
  const int64_t in = weight.dim(1);
  KILN_CHECK(x.rank() >= 1 && x.dim(-1) == in, "Linear: input ", dtype_name(x.dtype()), x.shape(),
             " must end in the layer's ", in, " input features");
  // One GEMM over all leading dims.
  Shape out_shape = x.shape();
  out_shape[out_shape.size() - 1] = weight.dim(0);
  Tensor y = apply_hook(product_hook, matmul(x.reshape({-1, in}), weight, false, true));
  if (bias.defined()) y = y + bias;
  return y.reshape(out_shape);
}

Embedding::Embedding(int64_t num_embeddings, int64_t dim, DType dtype) {
  register_parameter("weight", &weight, zeros({num_embeddings, dim}, dtype), Init::normal);
}

Tensor Embedding::forward(const Tensor& ids) const { return embedding(weight, ids); }

ComponentRegistry<NormFn>& norm_impls() {
  static ComponentRegistry<NormFn> r("norm");
  return r;
}

RMSNorm::RMSNorm(int64_t dim, double eps_, DType dtype, const std::string& impl)
    : eps(eps_), norm_(norm_impls().get(impl)) {
  register_parameter("weight", &weight, ones({dim}, dtype), Init::ones);
}

}  // namespace kiln::nn
