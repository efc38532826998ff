// The rms_norm op: declaration and composite.
#include "kiln/ops/compute_dtype.h"
#include "kiln/ops/declare.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/rms_norm.h"

namespace kiln {
namespace ops {
namespace {

const OpDef& kRmsNorm = declare({
    .name = "rms_norm",
    .num_inputs = 2,
    .attrs = {{"eps", AttrKind::float_, std::nullopt}},
    .infer = [](auto in, const Attrs& a) {
      const TypeInfo &x = in[0], &w = in[1];
      KILN_CHECK(is_floating(x.dtype) && x.shape.size() >= 1,
                 "rms_norm: x must be a floating tensor of rank >= 1, got ", ir::to_string(x));
      TypeInfo want{x.dtype, Shape{x.shape[x.shape.size() - 1]}};
      KILN_CHECK(w == want, "rms_norm: weight must be ", ir::to_string(want), " for x ",
                 ir::to_string(x), ", got ", ir::to_string(w));
      KILN_CHECK(a.f("eps") >= 0, "rms_norm: eps ", a.f("eps"), " must not be negative");
      return std::vector<TypeInfo>{x};
    },
    // One fused backward op instead of differentiating the composite.
    .vjp = [](VjpCall& c) {
      std::vector<Tensor> g = kiln::apply(KILN_OP("rms_norm_backward"),
                                    std::vector<Tensor>{c.inputs[0], c.inputs[1], c.cot(0)},
                                    c.attrs);
      c.grads = {g[0], g[1]};
    },
    .composite = [](CompositeCall& c) {
      c.outputs = {rms_norm_composite(c.inputs[0], c.inputs[1], c.attrs.f("eps"))};
    },
});

}  // namespace
}  // namespace ops

Tensor rms_norm_composite(const Tensor& x, const Tensor& w, double eps) {
  DType cd = ops::compute_dtype(x.dtype());
  Tensor xf = x.to(cd);
  Tensor inv_rms = rsqrt(mean(square(xf), {-1}, true) + eps);
  return (xf * inv_rms * w.to(cd)).to(x.dtype());
}

Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps) {
  return apply1(ops::kRmsNorm, {x, weight}, {{"eps", eps}});
}

}  // namespace kiln
