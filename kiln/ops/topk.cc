#include "kiln/ops/topk.h"

#include "kiln/ops/declare.h"
#include "kiln/ops/indexing.h"

namespace kiln {
namespace ops {
namespace {

const OpDef& kTopk = declare({
    .name = "topk",
    .num_inputs = 1,
    .attrs = {{"k", AttrKind::int_, std::nullopt}, {"axis", AttrKind::int_, int64_t{-1}}},
    .infer = [](auto in, const Attrs& a) {
      const TypeInfo& x = in[0];
      KILN_CHECK(x.dtype != DType::b8, "topk: x must be numeric, got ", ir::to_string(x),
                 "; convert it with .to(DType::i32)");
      KILN_CHECK(!x.shape.empty(), "topk: x must have at least one dimension, got a scalar");
      int axis = normalize_axis(a.i("axis"), x.shape.size(), "topk");
      int64_t k = a.i("k");
      KILN_CHECK(k >= 0 && k <= x.shape[axis], "topk: k = ", k, " must be in [0, ",
                 x.shape[axis], "] for axis ", axis, " of ", ir::to_string(x));
      Shape out = x.shape;
      out[axis] = k;
      return std::vector<TypeInfo>{{x.dtype, out}, {DType::i64, out}};
    },
    .vjp = [](VjpCall& c) {
      if (!is_floating(c.inputs[0].dtype())) return;
      c.grads[0] = scatter_add(zeros_like(c.inputs[0]), c.attrs.i("axis"), c.outputs[1], c.cot(0));
    },
});

}  // namespace
}  // namespace ops

std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t axis) {
  const Tensor in[] = {x};
  std::vector<Tensor> out = apply(ops::kTopk, in, {{"k", k}, {"axis", axis}});
  return {out[0], out[1]};
}

}  // namespace kiln
