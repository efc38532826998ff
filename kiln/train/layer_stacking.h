// The training step's parameter layout when the decoder runs as a scan
// (compile.scan_layers): every parameter of a block kept as one
// [n_layers, ...] stack, and so are its gradient and AdamW moments. The
// scan reads the stacks directly and the optimizer and clipping run once per
// parameter of a block, so the whole step's program stops growing with
// depth. Callers keep seeing one tensor per parameter: unstack hands out
// views into the stacks, and stack recognises them and takes the stacks
// back without a copy.
//
// Layout: the parameters before the layers, one stack per parameter of a
// block (in the block's order), the parameters after the layers.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "kiln/optim/adamw.h"
#include "kiln/runtime/tensor.h"

namespace kiln::train {

class LayerStacking {
 public:
  // The layout for parameters named "...layers.<l>.<name>" (layer-major, one
  // contiguous run, every layer with the same names, types and AdamW group);
  // nullopt when the parameters are not laid out so.
  static std::optional<LayerStacking> plan(const std::vector<std::string>& names,
                                           const std::vector<ir::TypeInfo>& types,
                                           const optim::ParamGroups& groups);

  size_t size() const { return total_ - layers_ * kinds_ + kinds_; }  // stacked tensors

  // One tensor per parameter -> the stacked layout. Layer tensors that are
  // the views unstack made of one stack become that stack again (no copy);
  // any others are copied into a new stack (and *copied set, if given).
  std::vector<Tensor> stack(const std::vector<Tensor>& per_param, bool* copied = nullptr) const;
  std::vector<ir::TypeInfo> stack(const std::vector<ir::TypeInfo>& per_param) const;
  // The stacked layout -> one tensor per parameter, the layers as views.
  std::vector<Tensor> unstack(const std::vector<Tensor>& stacked) const;

  // The AdamW groups of the stacked layout (a stack: its layers' group).
  optim::ParamGroups groups(const optim::ParamGroups& per_param) const;
  // For running the model on stacked values: one value per parameter with
  // the layers' unset (nn::ParameterScope's allow_unset), and the stacks
  // (ForwardOptions::stacked_layers).
  std::vector<Tensor> scope_values(const std::vector<Tensor>& stacked) const;
  std::vector<Tensor> layer_stacks(const std::vector<Tensor>& stacked) const;
  // optim::global_norm of the per-parameter gradients, bit for bit: the
  // per-parameter norms in parameter order, from the stacked gradients.
  Tensor global_norm(const std::vector<Tensor>& stacked_grads) const;

 private:
  size_t first_ = 0;   // per-parameter index of layer 0's first parameter
  size_t layers_ = 0;  // n_layers
  size_t kinds_ = 0;   // parameters per block
  size_t total_ = 0;   // parameters in all
};

}  // namespace kiln::train
