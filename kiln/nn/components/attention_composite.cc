// Attention "composite": the reference the fused kernels are tested against.
#include "kiln/nn/attention.h"

namespace kiln::nn {
namespace {

Tensor composite(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& options,
                 const Tensor& doc_ids) {
  // The op has no document mask; the explicit-mask composite stands in.
  if (doc_ids.defined()) return document_causal_attention(q, k, v, doc_ids);
  return scaled_dot_product_attention(q, k, v, options);
}

const Registration<AttentionFn> kComposite(
    attention_impls(), "composite",
    "kiln::scaled_dot_product_attention (an explicit [S, S] mask with packed documents)",
    composite);

}  // namespace
}  // namespace kiln::nn
