// Reverse-mode differentiation built from the ops' vjp rules. The function
// is traced into a graph, the backward is appended to the same graph as more
// IR, and the whole graph then runs in the caller's context: strict or debug
// eager run it op by op, an enclosing trace (compile) records it.
#pragma once
#include <functional>
#include <optional>
#include <vector>

#include "kiln/compiler/remat.h"
#include "kiln/runtime/program_cache.h"
#include "kiln/runtime/tensor.h"

namespace kiln {

class Recording;

struct ValueAndGrad {
  std::vector<Tensor> values;  // everything fn returned; values[0] is the loss
  std::vector<Tensor> grads;   // d loss / d args[i]; undefined for integer args
};

struct GradOptions {
  // Per-block compile: each model region's forward and backward run as one
  // compiled program (run_graph_compiling_regions), the rest op by op. Unset:
  // every node runs through the caller's context.
  std::optional<ProgramOptions> compile_regions;
  // The activation-memory policy: which forward values of each model region
  // its backward recomputes instead of keeping (kiln/compiler/remat.h).
  compiler::RematPolicy remat = compiler::RematPolicy::none;
};

// fn's first result must be a floating scalar (one element), the loss. The
// remaining results are passed through as auxiliary values. Inside fn values
// cannot be read (item(), printing): they do not exist until the graph runs.
std::function<ValueAndGrad(const std::vector<Tensor>&)> value_and_grad(TensorFn fn,
                                                                       GradOptions options = {});

// Appends to `rec` the gradient of scalar value `loss` with respect to
// `wrt`, using the vjp rules; must run with a TraceContext on `rec` current.
// Returns one pending tensor per `wrt` (undefined where no gradient exists).
std::vector<Tensor> append_backward(Recording& rec, const Tensor& loss, const std::vector<Tensor>& wrt);

// The vector-Jacobian product: appends to `rec` the gradient with respect
// to `wrt` of sum_i <outputs[i], cotangents[i]> (undefined cotangents are
// skipped). Same contract as append_backward.
std::vector<Tensor> append_vjp(Recording& rec, const std::vector<Tensor>& outputs,
                               const std::vector<Tensor>& cotangents, const std::vector<Tensor>& wrt);

}  // namespace kiln
