// Loss "fused_ce": the LM head and cross-entropy one vocabulary tile at a time.
#include "kiln/nn/loss.h"
#include "kiln/ops/fused_kernels.h"

namespace kiln::nn {
namespace {

const Registration<LossFn> kFusedCe(
    loss_impls(), "fused_ce",
    "kiln::linear_cross_entropy: one vocabulary tile at a time, never the [N, vocab] logits",
    [](const Tensor& h, const Tensor& w, const Tensor& targets, int64_t ignore_index) {
      return linear_cross_entropy(h, w, targets, ignore_index);
    });

}  // namespace
}  // namespace kiln::nn
