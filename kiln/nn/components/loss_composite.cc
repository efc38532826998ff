// Loss "composite": the logits materialised, then kiln::cross_entropy.
#include "kiln/nn/loss.h"
#include "kiln/ops/cross_entropy.h"
#include "kiln/ops/matmul.h"

namespace kiln::nn {
namespace {

const Registration<LossFn> kComposite(
    loss_impls(), "composite", "the [N, vocab] logits (matmul), then kiln::cross_entropy",
    [](const Tensor& h, const Tensor& w, const Tensor& targets, int64_t ignore_index) {
      return cross_entropy(matmul(h, w, false, true), targets, ignore_index);
    });

}  // namespace
}  // namespace kiln::nn
