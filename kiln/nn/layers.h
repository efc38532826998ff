// The basic layers: Linear, Embedding, RMSNorm. Parameter names and layouts
// are PyTorch's (Linear weight [out, in], so HF checkpoints load as they are).
#pragma once
#include "kiln/nn/module.h"

namespace kiln::nn {

// y = x @ weight^T (+ bias) over x's last axis; weight [out, in], bias [out].
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias, DType dtype = DType::f32);
  Tensor forward(const Tensor& x) const;
  Tensor weight, bias;  // bias undefined when the layer has none
  TensorHook product_hook;  // on x @ weight^T, before the bias is added
};

// Rows of weight [num_embeddings, dim] picked by integer ids.
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t dim, DType dtype = DType::f32);
  Tensor forward(const Tensor& ids) const;
  Tensor weight;
};

// kiln::rms_norm over the last axis with a learned scale (initialised to 1).
class RMSNorm : public Module {
 public:
  RMSNorm(int64_t dim, double eps, DType dtype = DType::f32);
  Tensor forward(const Tensor& x) const;
  Tensor weight;
  double eps;
};

}  // namespace kiln::nn
