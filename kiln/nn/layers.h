// The basic layers: Linear, Embedding, RMSNorm. Parameter names and layouts
// are PyTorch's (Linear weight [out, in], so HF checkpoints load as they are).
#pragma once
#include "kiln/nn/module.h"
#include "kiln/ops/collectives.h"

namespace kiln::nn {

// How a Linear is split over a tensor-parallel mesh axis (set by a plan,
// kiln/train/tensor_parallel.h). column: weight and bias hold a slice of the
// output features; the input enters the parallel region. row: weight holds
// a slice of the input features; the partial outputs are summed over the
// axis (leaving the region) before the (replicated) bias is added.
enum class ParallelStyle { none, column, row };

// y = x @ weight^T (+ bias) over x's last axis; weight [out, in], bias [out].
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias, DType dtype = DType::f32);
  Tensor forward(const Tensor& x) const;
  Tensor weight, bias;  // bias undefined when the layer has none
  ParallelStyle style = ParallelStyle::none;
  MeshAxis parallel_axis;  // the axis `style` splits over
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
