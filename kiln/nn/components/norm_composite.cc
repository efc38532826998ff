// Norm "composite": the reference the fused rms_norm kernel is tested against.
#include "kiln/nn/layers.h"
#include "kiln/ops/rms_norm.h"

namespace kiln::nn {
namespace {

const Registration<NormFn> kComposite(
    norm_impls(), "composite",
    "rms_norm from the basic ops, differentiated through them",
    [](const Tensor& x, const Tensor& weight, double eps) {
      return rms_norm_composite(x, weight, eps);
    });

}  // namespace
}  // namespace kiln::nn
