// The basic layers: Linear, Embedding, RMSNorm. Parameter names and layouts
// are PyTorch's (Linear weight [out, in], so HF checkpoints load as they are).
#pragma once
#include <string>

#include "kiln/nn/component_registry.h"
#include "kiln/nn/module.h"

namespace kiln::nn {

// RMS normalisation over x's last axis scaled by weight [dim]:
// x / sqrt(mean(x^2) + eps) * weight. Implementations: kiln/nn/components/norm_*.cc.
using NormFn = std::function<Tensor(const Tensor& x, const Tensor& weight, double eps)>;
ComponentRegistry<NormFn>& norm_impls();

// y = x @ weight^T (+ bias) over x's last axis; weight [out, in], bias [out].
// With a LoRA adapter (add_lora), y += scale * (x @ lora_A^T) @ lora_B^T.
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias, DType dtype = DType::f32);
  Tensor forward(const Tensor& x) const;

  // Adds a low-rank adapter (Hu et al., LoRA) as the children "lora_A"
  // [rank, in] and "lora_B" [out, rank], PEFT's names and initialisation:
  // lora_A uniform in +-1/sqrt(in) from `g` (kaiming_uniform with a =
  // sqrt(5)), lora_B zero, so the layer starts as it was. `scale` is PEFT's
  // lora_alpha / rank. An error if the layer has one already.
  void add_lora(int64_t rank, double scale, Generator& g);
  bool has_lora() const { return lora_A != nullptr; }

  Tensor weight, bias;  // bias undefined when the layer has none
  TensorHook product_hook;  // on x @ weight^T, before the bias is added
  std::unique_ptr<Linear> lora_A, lora_B;  // null without an adapter
  double lora_scale = 0;
};

// Rows of weight [num_embeddings, dim] picked by integer ids.
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t dim, DType dtype = DType::f32);
  Tensor forward(const Tensor& ids) const;
  Tensor weight;
};

// RMS normalisation over the last axis with a learned scale (initialised
// to 1), computed by the norm_impls() entry `impl`.
class RMSNorm : public Module {
 public:
  RMSNorm(int64_t dim, double eps, DType dtype = DType::f32, const std::string& impl = "fused");
  Tensor forward(const Tensor& x) const { return norm_(x, weight, eps); }
  Tensor weight;
  double eps;

 private:
  NormFn norm_;
};

}  // namespace kiln::nn
