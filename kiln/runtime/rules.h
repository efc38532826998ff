// The calls an op's vjp rule, composite and view scatter receive. All are
// written with ordinary tensor ops, so under a trace they emit IR (the
// backward is more IR) and in eager modes they run.
#pragma once
#include <span>
#include <vector>

#include "kiln/ir/attrs.h"
#include "kiln/runtime/tensor.h"

namespace kiln {

struct VjpCall {
  std::span<const Tensor> inputs;
  std::span<const Tensor> outputs;
  std::span<const Tensor> cotangents;  // undefined where an output has none
  const ir::Attrs& attrs;
  std::vector<Tensor> grads;  // one per input; leave undefined for no gradient
  // Per input: whether its gradient reaches what is differentiated. A rule
  // may leave the others undefined (and skip their work). Empty: all do.
  std::span<const bool> wanted;

  // The cotangent of output i, zeros where it has none.
  Tensor cot(size_t i) const;
  bool wants(size_t i) const { return wanted.empty() || wanted[i]; }
};

struct CompositeCall {
  std::span<const Tensor> inputs;
  const ir::Attrs& attrs;
  std::vector<Tensor> outputs;
};

struct ViewScatterCall {
  const Tensor& base;   // the view op's input
  const Tensor& value;  // the view's new value (the view's type)
  const ir::Attrs& attrs;
  Tensor result;        // `base` with the view's elements replaced by `value`
};

}  // namespace kiln
