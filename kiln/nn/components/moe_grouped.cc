// MoE experts "grouped": each token through its top_k experts only.
#include "kiln/nn/moe.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/fused_kernels.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/shape.h"
#include "kiln/ops/topk.h"

namespace kiln::nn {
namespace {

// Token-choice dispatch without host syncs (it must trace): the T * top_k
// (token, slot) assignments are sorted by expert with a stable topk, so
// each expert's rows are contiguous, then grouped_matmul runs all experts
// in one call per projection and index_add scatters the weighted rows back.
Tensor grouped_experts(const MoE& moe, const Tensor& x, const Routing& r) {
  const int64_t T = x.dim(0), K = moe.config.top_k, N = T * K, F = moe.config.ffn_dim;
  Tensor expert_of = r.indices.reshape({N});
  // Ascending expert id; ties (same expert) keep assignment order.
  Tensor order = topk(neg(expert_of), N, 0).second;
  Tensor token_of = arange(0, double(T)).unsqueeze(1).expand({T, K}).reshape({N});
  Tensor token = index_select(token_of, 0, order);
  Tensor xs = index_select(x, 0, token);                              // [N, D], grouped by expert
  Tensor h = grouped_matmul(xs, moe.experts.gate_up_proj, r.counts);  // [N, 2F]
  std::vector<Tensor> gu = split(h, {F, F}, -1);
  Tensor y = grouped_matmul(silu_mul(gu[0], gu[1]), moe.experts.down_proj, r.counts);  // [N, D]
  Tensor w = index_select(r.weights.reshape({N}), 0, order).unsqueeze(-1);
  return index_add(zeros_like(x), 0, token, y * w);
}

const Registration<ExpertsFn> kGrouped(
    moe_impls(), "grouped", "tokens sorted by expert, one kiln::grouped_matmul per projection",
    grouped_experts);

}  // namespace
}  // namespace kiln::nn
