// MoE experts "composite": exact and E times the work, the reference.
#include "kiln/nn/moe.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/fused_kernels.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/matmul.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"

namespace kiln::nn {
namespace {

// Every expert on every token: [E, T, *] intermediates, then the sum over
// experts weighted by a dense [T, E] routing matrix (zeros off the top-k).
Tensor dense_experts(const MoE& moe, const Tensor& x, Routing& r) {
  r.dropped = scalar(0, DType::i64, x.device());
  const int64_t F = moe.config.ffn_dim;
  Tensor h = matmul(x.unsqueeze(0), moe.experts.gate_up_proj, false, true);  // [E, T, 2F]
  std::vector<Tensor> gu = split(h, {F, F}, -1);
  Tensor y = matmul(silu_mul(gu[0], gu[1]), moe.experts.down_proj, false, true);  // [E, T, D]
  Tensor dense = sum(one_hot(r.indices, moe.config.n_experts, x.dtype()) * r.weights.unsqueeze(-1),
                     {1});  // [T, E]
  return sum(y * dense.t().unsqueeze(-1), {0});
}

const Registration<ExpertsFn> kComposite(
    moe_impls(), "composite",
    "every expert on every token, weighted by its routing weight (0 off the top-k)", dense_experts);

}  // namespace
}  // namespace kiln::nn
