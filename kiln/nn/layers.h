// The basic layers: Linear, Embedding, RMSNorm. Parameter names and layouts
// are PyTorch's (Linear weight [out, in], so HF checkpoints load as they are).
#pragma once
#include "kiln/nn/module.h"
#include "kiln/ops/collectives.h"

namespace kiln::nn {

// Tensor parallelism (a plan sets it, kiln/train/tensor_parallel.h) marks
// where a region split over a mesh axis begins and ends (Megatron-LM's f
// and g, kiln/ops/parallel_region.h): a module whose input enters a region
// (attention, the MLP: their column-parallel projections share one entry, so
// the backward sums the input's gradient over the axis once) and a
// row-parallel Linear whose partial outputs leave it. An axis of size 1:
// no region.
Tensor enter_region(const Tensor& x, const MeshAxis& axis);

// y = x @ weight^T (+ bias) over x's last axis; weight [out, in], bias [out].
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias, DType dtype = DType::f32);
  Tensor forward(const Tensor& x) const;
  Tensor weight, bias;  // bias undefined when the layer has none
  // Row-parallel: the partial outputs are summed over this axis (leaving
  // the region) before the (replicated) bias is added.
  MeshAxis leave_region;
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
