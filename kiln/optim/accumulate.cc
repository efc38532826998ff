#include "kiln/optim/accumulate.h"

#include "kiln/base/error.h"
#include "kiln/ops/elementwise.h"

namespace kiln::optim {

GradAccumulator::GradAccumulator(int64_t steps) : steps_(steps) {
  KILN_CHECK(steps >= 1, "gradient accumulation needs at least 1 microbatch, not ", steps);
}

void GradAccumulator::add(const std::vector<Tensor>& grads) {
  KILN_CHECK(count_ < steps_, "gradient accumulation: more than ", steps_,
             " microbatches added; call take() after each step");
  KILN_CHECK(count_ == 0 || grads.size() == sum_.size(), "gradient accumulation: ",
             grads.size(), " gradients, expected ", sum_.size());
  for (size_t i = 0; i < grads.size(); ++i) {
    DType acc = grads[i].dtype() == DType::f64 ? DType::f64 : DType::f32;
    Tensor g = grads[i].dtype() == acc ? grads[i] : grads[i].to(acc);
    if (count_ == 0) {
      sum_.push_back(g);
      dtypes_.push_back(grads[i].dtype());
    } else {
      sum_[i] = sum_[i] + g;
    }
  }
  ++count_;
}

std::vector<Tensor> GradAccumulator::take() {
  KILN_CHECK(count_ == steps_, "gradient accumulation: ", count_, " of ", steps_,
             " microbatches added");
  std::vector<Tensor> out;
  for (size_t i = 0; i < sum_.size(); ++i) {
    Tensor mean = steps_ == 1 ? sum_[i] : sum_[i] / double(steps_);
    out.push_back(mean.dtype() == dtypes_[i] ? mean : mean.to(dtypes_[i]));
  }
  sum_.clear();
  dtypes_.clear();
  count_ = 0;
  return out;
}

}  // namespace kiln::optim
