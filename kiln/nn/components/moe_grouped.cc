// MoE experts "grouped": each token through its top_k experts only, the
// layer's token dispatcher (token_dispatcher.h) bringing the rows to this
// rank's experts and their outputs back.
#include "kiln/nn/moe.h"
#include "kiln/nn/token_dispatcher.h"
#include "kiln/ops/fused_kernels.h"
#include "kiln/ops/shape.h"

namespace kiln::nn {
namespace {

// The dispatched rows, grouped by expert, through one kiln::grouped_matmul
// per projection (padding rows stay zeros).
Tensor grouped_experts(const MoE& moe, const Tensor& x, Routing& r) {
  const TokenDispatcher& dispatcher = moe.dispatcher();
  Dispatched d = dispatcher.dispatch(x, r, moe.config.n_experts);
  const int64_t F = moe.config.ffn_dim;
  Tensor h = grouped_matmul(d.x, moe.experts.gate_up_proj, d.counts);  // [R, 2F]
  std::vector<Tensor> gu = split(h, {F, F}, -1);
  Tensor y = grouped_matmul(silu_mul(gu[0], gu[1]), moe.experts.down_proj, d.counts);  // [R, D]
  r.dropped = d.dropped;
  return dispatcher.combine(y, d, x);
}

const Registration<ExpertsFn> kGrouped(
    moe_impls(), "grouped",
    "tokens sorted by expert (and exchanged by the token dispatcher), one kiln::grouped_matmul "
    "per projection",
    grouped_experts);

}  // namespace
}  // namespace kiln::nn
