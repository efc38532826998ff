#include "kiln/nn/layers.h"

#include <cmath>

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
  Tensor flat = x.reshape({-1, in});
  Tensor y = apply_hook(product_hook, matmul(flat, weight, false, true));
  if (bias.defined()) y = y + bias;
  if (lora_A) y = y + lora_B->forward(lora_A->forward(flat)) * lora_scale;
  return y.reshape(out_shape);
}

void Linear::add_lora(int64_t rank, double scale, Generator& g) {
  KILN_CHECK(!lora_A, "Linear::add_lora: the layer has an adapter already");
  KILN_CHECK(rank >= 1, "Linear::add_lora: rank must be at least 1, got ", rank);
  const int64_t in = weight.dim(1), out = weight.dim(0);
  lora_A = std::make_unique<Linear>(in, rank, false, weight.dtype());
  lora_B = std::make_unique<Linear>(rank, out, false, weight.dtype());
  const double bound = 1.0 / std::sqrt(double(in));
  lora_A->weight = uniform({rank, in}, -bound, bound, g, weight.dtype(), weight.device());
  lora_B->set_init("weight", Init::zeros);  // also when init_parameters runs again
  register_module("lora_A", lora_A.get());
  register_module("lora_B", lora_B.get());
  lora_scale = scale;
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
