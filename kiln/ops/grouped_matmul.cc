// The grouped_matmul op (every expert's Linear layer in one op) and its
// weight-gradient op: declarations, composites and vjp rules. The
// composites never read the group sizes on the host: each row's group comes
// from comparing its index with the running sums of the sizes, so they also
// run under a trace.
#include "kiln/ops/compute_dtype.h"
#include "kiln/ops/declare.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/fused_kernels.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/matmul.h"
#include "kiln/ops/reduction.h"

namespace kiln {
namespace ops {
namespace {

void check_group_sizes(const char* op, const TypeInfo& sizes, int64_t experts) {
  KILN_CHECK(is_integer(sizes.dtype) && sizes.shape == Shape{experts}, op,
             ": group_sizes must be an i32 or i64 [", experts, "] tensor (one size per expert), "
             "got ", ir::to_string(sizes));
}

const OpDef& kGroupedMatmul = declare({
    .name = "grouped_matmul",
    .num_inputs = 3,
    // true: w is [E, N, K] (Linear layout), rows multiply w[e]^T; false:
    // w is [E, K, N], rows multiply w[e].
    .attrs = {{"transpose_w", AttrKind::bool_, true}},
    .infer = [](auto in, const Attrs& a) {
      const TypeInfo &x = in[0], &w = in[1];
      bool tw = a.b("transpose_w");
      KILN_CHECK(is_floating(x.dtype) && x.shape.size() == 2 && w.dtype == x.dtype &&
                     w.shape.size() == 3 && w.shape[tw ? 2 : 1] == x.shape[1],
                 "grouped_matmul: x must be a floating [rows, K] tensor and w ",
                 tw ? "[experts, N, K]" : "[experts, K, N]", " of its dtype and K; got x ",
                 ir::to_string(x), " and w ", ir::to_string(w));
      check_group_sizes("grouped_matmul", in[2], w.shape[0]);
      return std::vector<TypeInfo>{{x.dtype, Shape{x.shape[0], w.shape[tw ? 1 : 2]}}};
    },
    .cost = [](auto in, auto out, const Attrs&) {
      ir::Cost c{2.0 * double(out[0].shape.numel()) * double(in[0].shape[1]), 0};
      for (const TypeInfo& t : {in[0], in[1], in[2], out[0]})
        c.bytes += double(t.shape.numel()) * double(itemsize(t.dtype));
      return c;
    },
    .vjp = [](VjpCall& c) {
      const Tensor &x = c.inputs[0], &w = c.inputs[1], &sizes = c.inputs[2];
      bool tw = c.attrs.b("transpose_w");
      Tensor dy = c.cot(0);
      c.grads[0] = apply1(KILN_OP("grouped_matmul"), {dy, w, sizes}, {{"transpose_w", !tw}});
      // dw[e] = dy_e^T x_e in Linear layout, x_e^T dy_e otherwise.
      c.grads[1] = apply1(KILN_OP("grouped_matmul_weight_grad"),
                          {tw ? dy : x, tw ? x : dy, sizes});
    },
    .composite = [](CompositeCall& c) {
      const Tensor &x = c.inputs[0], &w = c.inputs[1];
      DType cd = compute_dtype(x.dtype());
      // Every row through every expert, [E, T, N], then each row's own;
      // padding rows (group E) read expert E - 1 and are zeroed.
      Tensor all = matmul(x.to(cd).unsqueeze(0), w.to(cd), false, c.attrs.b("transpose_w"));
      const int64_t experts = w.dim(0);
      Tensor group = segment_ids(c.inputs[2], x.dim(0));
      Tensor ids = minimum(group, scalar(double(experts - 1), DType::i64, x.device()))
                       .reshape({1, x.dim(0), 1});
      Tensor pick = gather(all, 0, ids.expand({1, x.dim(0), all.dim(2)})).squeeze(0);
      Tensor used = lt(group, scalar(double(experts), DType::i64, x.device())).unsqueeze(1);
      c.outputs = {where(used, pick, zeros_like(pick)).to(x.dtype())};
    },
});

// a [T, P], b [T, Q], group_sizes [E] -> [E, P, Q] with out[e] = a_e^T b_e,
// a_e and b_e the rows of group e (zeros for an empty group; padding rows
// past the last group count for none).
const OpDef& kWeightGrad = declare({
    .name = "grouped_matmul_weight_grad",
    .num_inputs = 3,
    .infer = [](auto in, const Attrs&) {
      const TypeInfo &a = in[0], &b = in[1];
      KILN_CHECK(is_floating(a.dtype) && a.shape.size() == 2 && b.dtype == a.dtype &&
                     b.shape.size() == 2 && b.shape[0] == a.shape[0],
                 "grouped_matmul_weight_grad: a and b must be floating [rows, *] tensors of one "
                 "dtype and row count; got ",
                 ir::to_string(a), " and ", ir::to_string(b));
      KILN_CHECK(is_integer(in[2].dtype) && in[2].shape.size() == 1,
                 "grouped_matmul_weight_grad: group_sizes must be an i32 or i64 [experts] "
                 "tensor, got ", ir::to_string(in[2]));
      return std::vector<TypeInfo>{{a.dtype, Shape{in[2].shape[0], a.shape[1], b.shape[1]}}};
    },
    .cost = [](auto in, auto out, const Attrs&) {
      ir::Cost c{2.0 * double(in[0].shape.numel()) * double(in[1].shape[1]), 0};
      for (const TypeInfo& t : {in[0], in[1], in[2], out[0]})
        c.bytes += double(t.shape.numel()) * double(itemsize(t.dtype));
      return c;
    },
    .vjp = [](VjpCall& c) {
      const Tensor &a = c.inputs[0], &b = c.inputs[1], &sizes = c.inputs[2];
      Tensor g = c.cot(0);  // [E, P, Q]
      c.grads[0] = apply1(kGroupedMatmul, {b, g, sizes}, {{"transpose_w", true}});
      c.grads[1] = apply1(kGroupedMatmul, {a, g, sizes}, {{"transpose_w", false}});
    },
    .composite = [](CompositeCall& c) {
      const Tensor &a = c.inputs[0], &b = c.inputs[1], &sizes = c.inputs[2];
      DType cd = compute_dtype(a.dtype());
      int64_t experts = sizes.dim(0);
      // member[e, t]: row t belongs to group e.
      Tensor member = eq(segment_ids(sizes, a.dim(0)).unsqueeze(0),
                         arange(0, double(experts), 1, DType::i64, a.device()).unsqueeze(1));
      Tensor masked = a.to(cd).t().unsqueeze(0) * member.to(cd).unsqueeze(1);  // [E, P, T]
      c.outputs = {matmul(masked, b.to(cd)).to(a.dtype())};
    },
});

}  // namespace
}  // namespace ops

Tensor grouped_matmul(const Tensor& x, const Tensor& w, const Tensor& group_sizes) {
  return apply1(ops::kGroupedMatmul, {x, w, group_sizes});
}

}  // namespace kiln
