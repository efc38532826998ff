// Gradient accumulation over microbatches: the step's gradient is the mean
// of the microbatch gradients (each microbatch's loss is a mean over its
// tokens, so with equal microbatches this equals the gradient of the whole
// batch's mean loss). Sums run in f32 (f64 for f64) in microbatch order, so
// the result is deterministic.
#pragma once
#include <cstdint>
#include <vector>

#include "kiln/runtime/tensor.h"

namespace kiln::optim {

class GradAccumulator {
 public:
  explicit GradAccumulator(int64_t steps);

  // Adds one microbatch's gradients (the same list shape every time).
  void add(const std::vector<Tensor>& grads);
  int64_t count() const { return count_; }
  bool complete() const { return count_ == steps_; }
  // The mean of the added gradients, cast back to their dtypes; resets.
  // Throws kiln::Error when fewer than `steps` were added.
  std::vector<Tensor> take();

 private:
  int64_t steps_, count_ = 0;
  std::vector<Tensor> sum_;
  std::vector<DType> dtypes_;
};

}  // namespace kiln::optim
