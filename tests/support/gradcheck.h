// Gradient checks against central finite differences (run them in f64).
#pragma once
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <vector>

#include "kiln/runtime/tensor.h"

namespace kiln {
class Recording;
}

namespace kiln::test {

// Uniform values in [lo, hi) from a fixed seed, made on the host.
Tensor random_tensor(const Shape& shape, DType dtype, uint64_t seed, double lo = -1, double hi = 1);

struct GradCheckOptions {
  double eps = 1e-6;
  double rtol = 1e-5;
  double atol = 1e-7;
  // Indices of args to check (empty: every floating arg).
  std::vector<size_t> wrt;
};

// Differentiates loss = sum(fn(args) * c), c a fixed random cotangent, with
// value_and_grad and compares every gradient with central differences.
::testing::AssertionResult check_gradients(
    const std::function<Tensor(const std::vector<Tensor>&)>& fn, const std::vector<Tensor>& args,
    const GradCheckOptions& options = {});

// The graph value_and_grad(fn) records for `args`, not run: its outputs are
// fn's loss then the gradient of every arg; its captured[] holds `args`
// (and any constants), ready for run_graph.
std::shared_ptr<Recording> trace_loss_and_grads(
    const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
    const std::vector<Tensor>& args);

}  // namespace kiln::test
