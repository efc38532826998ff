// Norm "fused": the rms_norm op, whose CPU kernel and backward are fused.
#include "kiln/nn/layers.h"
#include "kiln/ops/rms_norm.h"

namespace kiln::nn {
namespace {

const Registration<NormFn> kFused(
    norm_impls(), "fused",
    "kiln::rms_norm: one op with a fused kernel and backward (its composite where none)",
    [](const Tensor& x, const Tensor& weight, double eps) { return rms_norm(x, weight, eps); });

}  // namespace
}  // namespace kiln::nn
