// Attention "flash": blockwise with an online softmax (kiln/ops/fused_kernels.h).
#include "kiln/nn/attention.h"
#include "kiln/ops/fused_kernels.h"

namespace kiln::nn {
namespace {

const Registration<AttentionFn> kFlash(
    attention_impls(), "flash",
    "kiln::flash_attention: blockwise online softmax, never the [S, S] scores",
    [](const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& options,
       const Tensor& doc_ids) { return flash_attention(q, k, v, options, doc_ids); });

}  // namespace
}  // namespace kiln::nn
