// The linear_cross_entropy op and its backward op: declarations, composites
// (the full logits matrix, in the compute dtype) and the vjp rule.
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

struct LceDims {
  int64_t rows, dim, vocab;
};

// Checks h [N, D], w [V, D] and targets [N]; `op` names the op in errors.
LceDims lce_dims(const char* op, const TypeInfo& h, const TypeInfo& w, const TypeInfo& targets) {
  KILN_CHECK(is_floating(h.dtype) && h.shape.size() == 2 && w.dtype == h.dtype &&
                 w.shape.size() == 2 && w.shape[1] == h.shape[1],
             op, ": h must be a floating [tokens, dim] tensor and w a [vocab, dim] tensor of "
             "its dtype and dim; got h ", ir::to_string(h), " and w ", ir::to_string(w));
  KILN_CHECK(is_integer(targets.dtype) && targets.shape == Shape{h.shape[0]}, op,
             ": targets must be i32 or i64 shaped [", h.shape[0], "] for h ", ir::to_string(h),
             ", got ", ir::to_string(targets));
  return {h.shape[0], h.shape[1], w.shape[0]};
}

// The logits the kernels never hold, [N, V] in the compute dtype.
Tensor logits(const Tensor& h, const Tensor& w) {
  DType cd = compute_dtype(h.dtype());
  return matmul(h.to(cd), w.to(cd), false, true);
}

Reduction parse_reduction(const std::string& r) {
  if (r == "sum") return Reduction::sum;
  if (r == "none") return Reduction::none;
  return Reduction::mean;
}

ir::Cost lce_cost(std::span<const TypeInfo> in, std::span<const TypeInfo> out, double products) {
  const TypeInfo &h = in[0], &w = in[1];
  ir::Cost c{products * 2.0 * double(h.shape[0]) * double(w.shape.numel()), 0};
  for (auto list : {in, out})
    for (const TypeInfo& t : list) c.bytes += double(t.shape.numel()) * double(itemsize(t.dtype));
  return c;
}

// Inputs h, w, targets, lse, dsoft, dtarget. With P = softmax(h w^T), the
// logits' gradient is P * dsoft[row] - onehot(target) * dtarget[row]
// (rows whose target is ignore_index take no one-hot term); outputs dh, dw.
const OpDef& kLceBackward = declare({
    .name = "linear_cross_entropy_backward",
    .num_inputs = 6,
    .attrs = {{"ignore_index", AttrKind::int_, int64_t{-100}}},
    .infer = [](auto in, const Attrs&) {
      const char* op = "linear_cross_entropy_backward";
      LceDims d = lce_dims(op, in[0], in[1], in[2]);
      TypeInfo row{compute_dtype(in[0].dtype), Shape{d.rows}};
      KILN_CHECK(in[3] == row && in[4] == row && in[5] == row, op,
                 ": lse, dsoft and dtarget must be ", ir::to_string(row), ", got ",
                 ir::to_string(in[3]), ", ", ir::to_string(in[4]), " and ", ir::to_string(in[5]));
      return std::vector<TypeInfo>{in[0], in[1]};
    },
    .cost = [](auto in, auto out, const Attrs&) { return lce_cost(in, out, 3); },
    .composite = [](CompositeCall& c) {
      const Tensor &h = c.inputs[0], &w = c.inputs[1], &targets = c.inputs[2];
      DType cd = compute_dtype(h.dtype());
      Device dev = h.device();
      Tensor p = exp(logits(h, w) - c.inputs[3].unsqueeze(-1));
      Tensor valid = ne(targets, scalar(double(c.attrs.i("ignore_index")), targets.dtype(), dev));
      Tensor safe = where(valid, targets, scalar(0, targets.dtype(), dev));
      Tensor pick = one_hot(safe, w.dim(0), cd) * (c.inputs[5] * valid.to(cd)).unsqueeze(-1);
      Tensor g = p * c.inputs[4].unsqueeze(-1) - pick;
      c.outputs = {matmul(g, w.to(cd)).to(h.dtype()), matmul(g, h.to(cd), true).to(w.dtype())};
    },
});

const OpDef& kLce = declare({
    .name = "linear_cross_entropy",
    .num_inputs = 3,
    .attrs = {{"ignore_index", AttrKind::int_, int64_t{-100}},
              {"reduction", AttrKind::string, std::string("mean")}},
    .infer = [](auto in, const Attrs& a) {
      LceDims d = lce_dims("linear_cross_entropy", in[0], in[1], in[2]);
      const std::string& r = a.s("reduction");
      KILN_CHECK(r == "mean" || r == "sum" || r == "none",
                 "linear_cross_entropy: unknown reduction '", r, "'; use mean, sum or none");
      DType cd = compute_dtype(in[0].dtype);
      return std::vector<TypeInfo>{{cd, r == "none" ? Shape{d.rows} : Shape{}},
                                   {cd, Shape{d.rows}}};
    },
    .cost = [](auto in, auto out, const Attrs&) { return lce_cost(in, out, 1); },
    .vjp = [](VjpCall& c) {
      const Tensor& targets = c.inputs[2];
      DType cd = compute_dtype(c.inputs[0].dtype());
      Device dev = targets.device();
      Tensor valid = ne(targets, scalar(double(c.attrs.i("ignore_index")), targets.dtype(), dev));
      // d loss / d (row i's loss), 0 for ignored rows.
      Tensor g = c.cot(0);
      if (c.attrs.s("reduction") == "mean") g = g / sum(valid.to(cd));
      Tensor dtarget = where(valid, g, scalar(0, cd, dev));
      Tensor dsoft = c.cotangents[1].defined() ? dtarget + c.cotangents[1] : dtarget;
      std::vector<Tensor> grads =
          kiln::apply(kLceBackward,
                std::vector<Tensor>{c.inputs[0], c.inputs[1], targets, c.outputs[1], dsoft, dtarget},
                {{"ignore_index", c.attrs.i("ignore_index")}});
      c.grads[0] = grads[0];
      c.grads[1] = grads[1];
    },
    .composite = [](CompositeCall& c) {
      const Tensor& targets = c.inputs[2];
      Tensor z = logits(c.inputs[0], c.inputs[1]);
      c.outputs = {cross_entropy(z, targets, c.attrs.i("ignore_index"),
                                 parse_reduction(c.attrs.s("reduction"))),
                   logsumexp(z, {-1})};
    },
});

}  // namespace
}  // namespace ops

Tensor linear_cross_entropy(const Tensor& h, const Tensor& w, const Tensor& targets,
                            int64_t ignore_index, Reduction reduction) {
  const char* r = reduction == Reduction::sum ? "sum" : reduction == Reduction::none ? "none" : "mean";
  return kiln::apply(ops::kLce, std::vector<Tensor>{h, w, targets},
               {{"ignore_index", ignore_index}, {"reduction", std::string(r)}})[0];
}

}  // namespace kiln
