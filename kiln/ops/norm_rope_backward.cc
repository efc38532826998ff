// Backward ops for rms_norm and rope, which the vjp rules of those ops call
// (one fused pass instead of differentiating their composites op by op).
// Their composites are the gradient formulas in basic ops.
#include "kiln/ops/compute_dtype.h"
#include "kiln/ops/declare.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"

namespace kiln {
namespace ops {
namespace {

// Inputs x, weight, dy; outputs dx, dweight. With r = rsqrt(mean(x^2) + eps)
// per row: dx = r * (dy * w) - x * r^3 / D * sum(dy * w * x), and
// dweight = sum over rows of dy * x * r.
const OpDef& kRmsNormBackward = declare({
    .name = "rms_norm_backward",
    .num_inputs = 3,
    .attrs = {{"eps", AttrKind::float_, std::nullopt}},
    .infer = [](auto in, const Attrs& a) {
      const TypeInfo &x = in[0], &w = in[1], &dy = in[2];
      KILN_CHECK(is_floating(x.dtype) && x.shape.size() >= 1 &&
                     (w == TypeInfo{x.dtype, Shape{x.shape[x.shape.size() - 1]}}) && dy == x,
                 "rms_norm_backward: x must be floating of rank >= 1, weight [x.dim(-1)] and dy "
                 "like x, all of one dtype; got ",
                 ir::to_string(x), ", ", ir::to_string(w), " and ", ir::to_string(dy));
      return std::vector<TypeInfo>{x, w};
    },
    .composite = [](CompositeCall& c) {
      const Tensor& x = c.inputs[0];
      DType cd = compute_dtype(x.dtype());
      Tensor xf = x.to(cd), g = c.inputs[2].to(cd) * c.inputs[1].to(cd);
      Tensor r = rsqrt(mean(square(xf), {-1}, true) + c.attrs.f("eps"));
      Tensor dot = sum(g * xf, {-1}, true);
      Tensor dx = r * g - xf * (r * r * r * dot / double(x.dim(-1)));
      Tensor dw = sum((c.inputs[2].to(cd) * xf * r).reshape({-1, x.dim(-1)}), {0});
      c.outputs = {dx.to(x.dtype()), dw.to(x.dtype())};
    },
});

// rotate_half(x) = cat(-x2, x1).
Tensor rotate_half(const Tensor& x) {
  int64_t half = x.dim(-1) / 2;
  return concat({-x.slice(-1, half, 2 * half), x.slice(-1, 0, half)}, -1);
}

// Inputs x, cos, sin, dy; outputs dx, dcos, dsin. y = x * cos +
// rotate_half(x) * sin, so dx = dy * cos + rotate_half^T(dy * sin) with
// rotate_half^T(z) = cat(z2, -z1) = -rotate_half(z); dcos and dsin sum
// dy * x and dy * rotate_half(x) over the heads (and the batch when the
// tables are shared by it).
const OpDef& kRopeBackward = declare({
    .name = "rope_backward",
    .num_inputs = 4,
    .infer = [](auto in, const Attrs&) {
      // x, cos and sin as the forward op checks them.
      ir::get_op("rope").infer_types(in.first(3), {});
      KILN_CHECK(in[3] == in[0], "rope_backward: dy must be ", ir::to_string(in[0]), ", got ",
                 ir::to_string(in[3]));
      return std::vector<TypeInfo>{in[0], in[1], in[2]};
    },
    .composite = [](CompositeCall& c) {
      const Tensor &x = c.inputs[0], &cos = c.inputs[1], &sin = c.inputs[2];
      DType cd = compute_dtype(x.dtype());
      Tensor xf = x.to(cd), g = c.inputs[3].to(cd);
      Tensor cf = cos.to(cd).unsqueeze(-2), sf = sin.to(cd).unsqueeze(-2);
      Tensor dx = g * cf - rotate_half(g * sf);
      // Sum over heads, then over the batch for [seq, head_dim] tables.
      std::vector<int64_t> axes = cos.rank() == 2 ? std::vector<int64_t>{0, 2} : std::vector<int64_t>{2};
      Tensor dcos = sum(g * xf, axes), dsin = sum(g * rotate_half(xf), axes);
      c.outputs = {dx.to(x.dtype()), dcos.to(cos.dtype()), dsin.to(sin.dtype())};
    },
});

}  // namespace
}  // namespace ops
}  // namespace kiln
