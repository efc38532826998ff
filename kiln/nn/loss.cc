#include "kiln/nn/loss.h"

namespace kiln::nn {

ComponentRegistry<LossFn>& loss_impls() {
  static ComponentRegistry<LossFn> r("loss");
  return r;
}

}  // namespace kiln::nn
