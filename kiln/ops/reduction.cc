// Reductions: sum, mean, max, min, argmax, logsumexp, var over a set of axes,
// and softmax / log_softmax along one axis.
#include "kiln/ops/reduction.h"

#include <algorithm>

#include "kiln/ops/declare.h"
#include "kiln/ops/elementwise.h"

namespace kiln {
namespace ops {
namespace {

void require_floating(DType t, const char* what) {
  KILN_CHECK(is_floating(t), what, ": needs a floating input, got ", dtype_name(t),
             "; convert it first with .to(DType::f32)");
}

void require_numeric(DType t, const char* what) {
  KILN_CHECK(t != DType::b8, what,
             ": bool inputs are not supported; convert first with .to(DType::i32)");
}

// max, min and argmax have no value for an empty set of elements.
void require_elements(const Shape& s, const std::vector<int64_t>& axes, const char* what) {
  for (int64_t a : normalize_axes(axes, s.size(), what))
    KILN_CHECK(a >= s.size() || s[a] > 0, what, ": cannot reduce over axis ", a,
               " of size 0 (there is no element to take)");
}

// Number of elements folded into each result.
int64_t reduced_count(const Shape& s, const std::vector<int64_t>& axes, const char* what) {
  int64_t n = 1;
  for (int64_t a : normalize_axes(axes, s.size(), what)) n *= a < s.size() ? s[a] : 1;
  return n;
}

// A reduction's result reshaped to keepdim form, so it broadcasts against the input.
Tensor keepdim_view(const Tensor& r, const Shape& in, const std::vector<int64_t>& axes) {
  return r.reshape(reduced_shape(in, axes, true, "reduction"));
}

ir::CostFn cost_per_element(double flops) {
  return [flops](auto in, auto out, const Attrs&) {
    ir::Cost c;
    c.flops = flops * double(in[0].shape.numel());
    c.bytes = double(in[0].shape.numel()) * itemsize(in[0].dtype) +
              double(out[0].shape.numel()) * itemsize(out[0].dtype);
    return c;
  };
}

const std::vector<ir::AttrSpec> kAxesAttrs = {{"axes", AttrKind::ints, ir::IntList{}},
                                              {"keepdim", AttrKind::bool_, false}};

// The shape rule of mean, logsumexp and var: a floating input, reduced.
ir::InferFn floating_rule(const char* what) {
  return [what](auto in, const Attrs& a) {
    require_floating(in[0].dtype, what);
    Shape s = reduced_shape(in[0].shape, a.ints("axes"), a.b("keepdim"), what);
    return std::vector<TypeInfo>{{in[0].dtype, s}};
  };
}

const OpDef& kSum = declare({
    .name = "sum",
    .attrs = kAxesAttrs,
    .infer = [](auto in, const Attrs& a) {
      // Bools sum to counts.
      DType out = in[0].dtype == DType::b8 ? DType::i64 : in[0].dtype;
      Shape s = reduced_shape(in[0].shape, a.ints("axes"), a.b("keepdim"), "sum");
      return std::vector<TypeInfo>{{out, s}};
    },
    .fusion = ir::FusionClass::reduction,
    .cost = cost_per_element(1),
    .vjp = [](VjpCall& c) {
      const Tensor& x = c.inputs[0];
      c.grads[0] = keepdim_view(c.cot(0), x.shape(), c.attrs.ints("axes")).expand(x.shape());
    },
});

const OpDef& kMean = declare({
    .name = "mean",
    .attrs = kAxesAttrs,
    .infer = floating_rule("mean"),
    .fusion = ir::FusionClass::reduction,
    .cost = cost_per_element(1),
    .vjp = [](VjpCall& c) {
      const Tensor& x = c.inputs[0];
      const auto& axes = c.attrs.ints("axes");
      Tensor g = keepdim_view(c.cot(0), x.shape(), axes).expand(x.shape());
      c.grads[0] = g / double(reduced_count(x.shape(), axes, "mean"));
    },
});

// The gradient of max and min goes to the elements equal to the result,
// split evenly among ties (as torch.amax / torch.amin).
void extremum_vjp(VjpCall& c) {
  const Tensor& x = c.inputs[0];
  const auto& axes = c.attrs.ints("axes");
  Tensor hit = eq(x, keepdim_view(c.outputs[0], x.shape(), axes)).to(x.dtype());
  c.grads[0] = hit * (keepdim_view(c.cot(0), x.shape(), axes) / sum(hit, axes, true));
}

OpDef extremum_def(const char* name) {
  return {
      .name = name,
      .attrs = kAxesAttrs,
      .infer = [name](auto in, const Attrs& a) {
        require_numeric(in[0].dtype, name);
        require_elements(in[0].shape, a.ints("axes"), name);
        return std::vector<TypeInfo>{
            {in[0].dtype, reduced_shape(in[0].shape, a.ints("axes"), a.b("keepdim"), name)}};
      },
      .fusion = ir::FusionClass::reduction,
      .cost = cost_per_element(1),
      .vjp = extremum_vjp,
  };
}
const OpDef& kMax = declare(extremum_def("max"));
const OpDef& kMin = declare(extremum_def("min"));

const OpDef& kArgmax = declare({
    .name = "argmax",
    .attrs = {{"axis", AttrKind::int_, std::nullopt}, {"keepdim", AttrKind::bool_, false}},
    .infer = [](auto in, const Attrs& a) {
      require_numeric(in[0].dtype, "argmax");
      std::vector<int64_t> axes{a.i("axis")};
      require_elements(in[0].shape, axes, "argmax");
      return std::vector<TypeInfo>{
          {DType::i64, reduced_shape(in[0].shape, axes, a.b("keepdim"), "argmax")}};
    },
    .fusion = ir::FusionClass::reduction,
    .cost = cost_per_element(1),
});

const OpDef& kLogsumexp = declare({
    .name = "logsumexp",
    .attrs = kAxesAttrs,
    .infer = floating_rule("logsumexp"),
    .fusion = ir::FusionClass::reduction,
    .cost = cost_per_element(4),
    .vjp = [](VjpCall& c) {
      const Tensor& x = c.inputs[0];
      const auto& axes = c.attrs.ints("axes");
      c.grads[0] = keepdim_view(c.cot(0), x.shape(), axes) *
                   exp(x - keepdim_view(c.outputs[0], x.shape(), axes));
    },
});

const OpDef& kVar = declare({
    .name = "var",
    .attrs = {kAxesAttrs[0], {"correction", AttrKind::int_, int64_t{1}}, kAxesAttrs[1]},
    .infer = floating_rule("var"),
    .fusion = ir::FusionClass::reduction,
    .cost = cost_per_element(4),
    .vjp = [](VjpCall& c) {
      const Tensor& x = c.inputs[0];
      const auto& axes = c.attrs.ints("axes");
      int64_t n = reduced_count(x.shape(), axes, "var");
      double denom = double(std::max<int64_t>(0, n - c.attrs.i("correction")));
      Tensor centred = x - mean(x, axes, true);
      c.grads[0] = keepdim_view(c.cot(0), x.shape(), axes) * centred * (2.0 / denom);
    },
});

ir::InferFn softmax_rule(const char* what) {
  return [what](auto in, const Attrs& a) {
    require_floating(in[0].dtype, what);
    normalize_axis(a.i("axis"), in[0].shape.size(), what);
    return std::vector<TypeInfo>{in[0]};
  };
}

const OpDef& kSoftmax = declare({
    .name = "softmax",
    .attrs = {{"axis", AttrKind::int_, std::nullopt}},
    .infer = softmax_rule("softmax"),
    .fusion = ir::FusionClass::reduction,
    .cost = cost_per_element(5),
    .vjp = [](VjpCall& c) {
      const Tensor& y = c.outputs[0];
      Tensor g = c.cot(0);
      c.grads[0] = y * (g - sum(g * y, {c.attrs.i("axis")}, true));
    },
});

const OpDef& kLogSoftmax = declare({
    .name = "log_softmax",
    .attrs = {{"axis", AttrKind::int_, std::nullopt}},
    .infer = softmax_rule("log_softmax"),
    .fusion = ir::FusionClass::reduction,
    .cost = cost_per_element(5),
    .vjp = [](VjpCall& c) {
      Tensor g = c.cot(0);
      c.grads[0] = g - exp(c.outputs[0]) * sum(g, {c.attrs.i("axis")}, true);
    },
});

Attrs axes_attrs(const std::vector<int64_t>& axes, bool keepdim) {
  return {{"axes", axes}, {"keepdim", keepdim}};
}

}  // namespace
}  // namespace ops

Tensor sum(const Tensor& x, const std::vector<int64_t>& axes, bool keepdim) {
  return apply1(ops::kSum, {x}, ops::axes_attrs(axes, keepdim));
}

Tensor mean(const Tensor& x, const std::vector<int64_t>& axes, bool keepdim) {
  return apply1(ops::kMean, {x}, ops::axes_attrs(axes, keepdim));
}

Tensor max(const Tensor& x, const std::vector<int64_t>& axes, bool keepdim) {
  return apply1(ops::kMax, {x}, ops::axes_attrs(axes, keepdim));
}

Tensor min(const Tensor& x, const std::vector<int64_t>& axes, bool keepdim) {
  return apply1(ops::kMin, {x}, ops::axes_attrs(axes, keepdim));
}

Tensor argmax(const Tensor& x, int64_t axis, bool keepdim) {
  return apply1(ops::kArgmax, {x}, {{"axis", axis}, {"keepdim", keepdim}});
}

Tensor logsumexp(const Tensor& x, const std::vector<int64_t>& axes, bool keepdim) {
  return apply1(ops::kLogsumexp, {x}, ops::axes_attrs(axes, keepdim));
}

Tensor var(const Tensor& x, const std::vector<int64_t>& axes, int64_t correction, bool keepdim) {
  return apply1(ops::kVar, {x}, {{"axes", axes}, {"correction", correction}, {"keepdim", keepdim}});
}

Tensor softmax(const Tensor& x, int64_t axis) {
  return apply1(ops::kSoftmax, {x}, {{"axis", axis}});
}

Tensor log_softmax(const Tensor& x, int64_t axis) {
  return apply1(ops::kLogSoftmax, {x}, {{"axis", axis}});
}

}  // namespace kiln
