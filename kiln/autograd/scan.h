// scan: a loop as one IR op. The body, a function of tensors, is traced once
// into a graph (kept as the op's `body` attribute, IR text) and run `length`
// times:
//   carry <- body(carry, xs[i], invariants)[carries]    i = 0 .. length-1
//   ys[i]  = body(carry, xs[i], invariants)[rest]
// `xs` are stacked along dim 0 (length slices each), `invariants` are read
// unchanged by every iteration, and the results are the final carries and
// the ys stacked along dim 0. A transformer's decoder stack is a scan over
// its stacked layer weights: one body program however deep the model, so
// compile time and program size stop growing with depth.
//
// Differentiable: traced (as value_and_grad and compile trace), the forward
// also keeps every iteration's carry (one activation per layer, as
// activation checkpointing per block would; run eagerly, as validation
// runs, it keeps none, since nothing can differentiate it then), and
// the backward is a reverse scan whose body recomputes the forward
// iteration and applies its vector-Jacobian product, so the gradients are
// bit-identical to those of the unrolled loop.
#pragma once
#include <vector>

#include "kiln/autograd/grad.h"

namespace kiln {

struct ScanResult {
  std::vector<Tensor> carries;  // after the last iteration
  std::vector<Tensor> ys;       // stacked along dim 0
};

// `body` maps (carries..., x slices..., invariants...) to (new carries...,
// ys...); new carries have the carries' types. Tensors the body reads from
// its closure become invariants. With `reverse` the iterations run from
// the last slice to the first (ys keep slice order).
ScanResult scan(const TensorFn& body, const std::vector<Tensor>& carries,
                const std::vector<Tensor>& xs, const std::vector<Tensor>& invariants,
                bool reverse = false);

}  // namespace kiln
