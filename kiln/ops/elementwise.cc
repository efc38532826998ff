// Elementwise op declarations: shape/dtype rules, vjp rules, user functions.
#include "kiln/ops/elementwise.h"

#include <cmath>
#include <numbers>

#include "kiln/ops/declare.h"

namespace kiln {
namespace ops {
namespace {

using ir::FusionClass;

std::vector<TypeInfo> float_unary(std::span<const TypeInfo> in, const Attrs&) {
  KILN_CHECK(is_floating(in[0].dtype), "needs a floating input, got ", dtype_name(in[0].dtype),
             "; convert with .to(f32)");
  return {in[0]};
}

std::vector<TypeInfo> numeric_unary(std::span<const TypeInfo> in, const Attrs&) {
  KILN_CHECK(in[0].dtype != DType::b8, "does not take bool tensors; convert with .to(dtype)");
  return {in[0]};
}

std::vector<TypeInfo> arithmetic(std::span<const TypeInfo> in, const Attrs&) {
  KILN_CHECK(in[0].dtype != DType::b8, "does not take bool tensors; convert with .to(dtype)");
  return {broadcast_types(in)};
}

std::vector<TypeInfo> float_binary(std::span<const TypeInfo> in, const Attrs&) {
  TypeInfo t = broadcast_types(in);
  KILN_CHECK(is_floating(t.dtype), "needs floating inputs, got ", dtype_name(t.dtype),
             "; convert with .to(f32)");
  return {t};
}

std::vector<TypeInfo> comparison(std::span<const TypeInfo> in, const Attrs&) {
  return {broadcast_types(in, DType::b8)};
}

std::vector<TypeInfo> logical(std::span<const TypeInfo> in, const Attrs&) {
  for (const TypeInfo& t : in)
    KILN_CHECK(t.dtype == DType::b8, "needs bool inputs, got ", dtype_name(t.dtype));
  return {broadcast_types(in)};
}

// Declares an elementwise op; `vjp` may be empty for non-differentiable ones.
const OpDef& elementwise(std::string name, int inputs, ir::InferFn infer, ir::VjpFn vjp,
                         std::vector<ir::AttrSpec> attrs = {}) {
  return declare({.name = std::move(name),
                  .num_inputs = inputs,
                  .attrs = std::move(attrs),
                  .infer = std::move(infer),
                  .fusion = FusionClass::elementwise,
                  .vjp = std::move(vjp)});
}

// Gradients of binary ops are summed back over broadcast dimensions.
void set_binary_grads(VjpCall& c, const Tensor& ga, const Tensor& gb) {
  if (ga.defined()) c.grads[0] = sum_to(ga, c.inputs[0].shape());
  if (gb.defined()) c.grads[1] = sum_to(gb, c.inputs[1].shape());
}

const double kSqrt2OverPi = std::sqrt(2.0 / std::numbers::pi);
constexpr double kGeluCubic = 0.044715;

Tensor gelu_derivative(const Tensor& x, bool tanh_form) {
  if (!tanh_form) {
    Tensor cdf = (erf(x * (1.0 / std::numbers::sqrt2)) + 1.0) * 0.5;
    Tensor pdf = exp(square(x) * -0.5) * (1.0 / std::sqrt(2.0 * std::numbers::pi));
    return cdf + x * pdf;
  }
  Tensor t = tanh((x + x * x * x * kGeluCubic) * kSqrt2OverPi);
  Tensor du = (square(x) * (3.0 * kGeluCubic) + 1.0) * kSqrt2OverPi;
  return (t + 1.0) * 0.5 + x * 0.5 * (1.0 - square(t)) * du;
}

// Unary ops. Each vjp reads the input x, the output y and the cotangent g.
const OpDef& kNeg = elementwise("neg", 1, numeric_unary, [](VjpCall& c) { c.grads[0] = -c.cot(0); });
const OpDef& kAbs = elementwise("abs", 1, numeric_unary,
                                [](VjpCall& c) { c.grads[0] = c.cot(0) * sign(c.inputs[0]); });
const OpDef& kExp = elementwise("exp", 1, float_unary,
                                [](VjpCall& c) { c.grads[0] = c.cot(0) * c.outputs[0]; });
const OpDef& kLog = elementwise("log", 1, float_unary,
                                [](VjpCall& c) { c.grads[0] = c.cot(0) / c.inputs[0]; });
const OpDef& kSqrt = elementwise("sqrt", 1, float_unary,
                                 [](VjpCall& c) { c.grads[0] = c.cot(0) * 0.5 / c.outputs[0]; });
const OpDef& kRsqrt = elementwise("rsqrt", 1, float_unary, [](VjpCall& c) {
  const Tensor& y = c.outputs[0];
  c.grads[0] = c.cot(0) * -0.5 * y * y * y;
});
const OpDef& kReciprocal = elementwise("reciprocal", 1, float_unary, [](VjpCall& c) {
  const Tensor& y = c.outputs[0];
  c.grads[0] = -c.cot(0) * y * y;
});
const OpDef& kSquare = elementwise("square", 1, numeric_unary,
                                   [](VjpCall& c) { c.grads[0] = c.cot(0) * 2.0 * c.inputs[0]; });
const OpDef& kTanh = elementwise("tanh", 1, float_unary, [](VjpCall& c) {
  c.grads[0] = c.cot(0) * (1.0 - square(c.outputs[0]));
});
const OpDef& kSigmoid = elementwise("sigmoid", 1, float_unary, [](VjpCall& c) {
  const Tensor& y = c.outputs[0];
  c.grads[0] = c.cot(0) * y * (1.0 - y);
});
const OpDef& kSilu = elementwise("silu", 1, float_unary, [](VjpCall& c) {
  const Tensor& x = c.inputs[0];
  Tensor s = sigmoid(x);
  c.grads[0] = c.cot(0) * s * (x * (1.0 - s) + 1.0);
});
const OpDef& kGelu = elementwise(
    "gelu", 1, float_unary,
    [](VjpCall& c) {
      c.grads[0] = c.cot(0) * gelu_derivative(c.inputs[0], c.attrs.b("tanh_approximation"));
    },
    {{"tanh_approximation", AttrKind::bool_, false}});
const OpDef& kSin = elementwise("sin", 1, float_unary,
                                [](VjpCall& c) { c.grads[0] = c.cot(0) * cos(c.inputs[0]); });
const OpDef& kCos = elementwise("cos", 1, float_unary,
                                [](VjpCall& c) { c.grads[0] = -c.cot(0) * sin(c.inputs[0]); });
const OpDef& kErf = elementwise("erf", 1, float_unary, [](VjpCall& c) {
  const Tensor& x = c.inputs[0];
  c.grads[0] = c.cot(0) * exp(-square(x)) * (2.0 / std::sqrt(std::numbers::pi));
});
const OpDef& kSign = elementwise("sign", 1, numeric_unary, [](VjpCall& c) {
  c.grads[0] = zeros_like(c.inputs[0]);
});
const OpDef& kLogicalNot = elementwise("logical_not", 1, logical, nullptr);

// Binary ops.
const OpDef& kAdd = elementwise("add", 2, arithmetic, [](VjpCall& c) {
  set_binary_grads(c, c.cot(0), c.cot(0));
});
const OpDef& kSub = elementwise("sub", 2, arithmetic, [](VjpCall& c) {
  set_binary_grads(c, c.cot(0), -c.cot(0));
});
const OpDef& kMul = elementwise("mul", 2, arithmetic, [](VjpCall& c) {
  Tensor g = c.cot(0);
  set_binary_grads(c, g * c.inputs[1], g * c.inputs[0]);
});
const OpDef& kDiv = elementwise("div", 2, float_binary, [](VjpCall& c) {
  Tensor g = c.cot(0);
  const Tensor& b = c.inputs[1];
  set_binary_grads(c, g / b, -g * c.outputs[0] / b);
});
const OpDef& kPow = elementwise("pow", 2, float_binary, [](VjpCall& c) {
  Tensor g = c.cot(0);
  const Tensor &a = c.inputs[0], &b = c.inputs[1], &y = c.outputs[0];
  set_binary_grads(c, g * b * pow(a, b - 1.0), g * y * log(a));
});

// Ties split the gradient evenly, as torch.maximum does.
void select_grads(VjpCall& c, const Tensor& a_wins) {
  Tensor g = c.cot(0);
  Tensor tie = eq(c.inputs[0], c.inputs[1]);
  Tensor zero = zeros_like(g), half = g * 0.5;
  Tensor ga = where(tie, half, where(a_wins, g, zero));
  Tensor gb = where(tie, half, where(a_wins, zero, g));
  set_binary_grads(c, ga, gb);
}
const OpDef& kMaximum = elementwise("maximum", 2, arithmetic, [](VjpCall& c) {
  select_grads(c, gt(c.inputs[0], c.inputs[1]));
});
const OpDef& kMinimum = elementwise("minimum", 2, arithmetic, [](VjpCall& c) {
  select_grads(c, lt(c.inputs[0], c.inputs[1]));
});

const OpDef& kEq = elementwise("eq", 2, comparison, nullptr);
const OpDef& kNe = elementwise("ne", 2, comparison, nullptr);
const OpDef& kLt = elementwise("lt", 2, comparison, nullptr);
const OpDef& kLe = elementwise("le", 2, comparison, nullptr);
const OpDef& kGt = elementwise("gt", 2, comparison, nullptr);
const OpDef& kGe = elementwise("ge", 2, comparison, nullptr);
const OpDef& kAnd = elementwise("logical_and", 2, logical, nullptr);
const OpDef& kOr = elementwise("logical_or", 2, logical, nullptr);

const OpDef& kWhere = elementwise(
    "where", 3,
    [](std::span<const TypeInfo> in, const Attrs&) {
      KILN_CHECK(in[0].dtype == DType::b8, "condition must be bool, got ", dtype_name(in[0].dtype));
      TypeInfo t = broadcast_types(in.subspan(1));
      t.shape = broadcast_shapes(in[0].shape, t.shape, "where");
      return std::vector<TypeInfo>{t};
    },
    [](VjpCall& c) {
      Tensor g = c.cot(0), zero = zeros_like(g);
      const Tensor& cond = c.inputs[0];
      c.grads[1] = sum_to(where(cond, g, zero), c.inputs[1].shape());
      c.grads[2] = sum_to(where(cond, zero, g), c.inputs[2].shape());
    });

Tensor unary(const OpDef& op, const Tensor& x) { return apply1(op, {x}); }
Tensor binary(const OpDef& op, const Tensor& a, const Tensor& b) { return apply1(op, {a, b}); }

}  // namespace
}  // namespace ops

using namespace ops;

Tensor neg(const Tensor& x) { return unary(kNeg, x); }
Tensor abs(const Tensor& x) { return unary(kAbs, x); }
Tensor exp(const Tensor& x) { return unary(kExp, x); }
Tensor log(const Tensor& x) { return unary(kLog, x); }
Tensor sqrt(const Tensor& x) { return unary(kSqrt, x); }
Tensor rsqrt(const Tensor& x) { return unary(kRsqrt, x); }
Tensor reciprocal(const Tensor& x) { return unary(kReciprocal, x); }
Tensor square(const Tensor& x) { return unary(kSquare, x); }
Tensor tanh(const Tensor& x) { return unary(kTanh, x); }
Tensor sigmoid(const Tensor& x) { return unary(kSigmoid, x); }
Tensor silu(const Tensor& x) { return unary(kSilu, x); }
Tensor gelu(const Tensor& x, bool tanh_approximation) {
  return apply1(kGelu, {x}, {{"tanh_approximation", tanh_approximation}});
}
Tensor sin(const Tensor& x) { return unary(kSin, x); }
Tensor cos(const Tensor& x) { return unary(kCos, x); }
Tensor erf(const Tensor& x) { return unary(kErf, x); }
Tensor sign(const Tensor& x) { return unary(kSign, x); }
Tensor logical_not(const Tensor& x) { return unary(kLogicalNot, x); }

Tensor add(const Tensor& a, const Tensor& b) { return binary(kAdd, a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary(kSub, a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary(kMul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return binary(kDiv, a, b); }
Tensor pow(const Tensor& a, const Tensor& b) { return binary(kPow, a, b); }
Tensor pow(const Tensor& a, double e) { return binary(kPow, a, scalar(e, a.dtype(), a.device())); }
Tensor maximum(const Tensor& a, const Tensor& b) { return binary(kMaximum, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return binary(kMinimum, a, b); }
Tensor eq(const Tensor& a, const Tensor& b) { return binary(kEq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return binary(kNe, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return binary(kLt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return binary(kLe, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return binary(kGt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return binary(kGe, a, b); }
Tensor logical_and(const Tensor& a, const Tensor& b) { return binary(kAnd, a, b); }
Tensor logical_or(const Tensor& a, const Tensor& b) { return binary(kOr, a, b); }
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  return apply1(kWhere, {cond, a, b});
}

namespace {
Tensor scalar_like(double v, const Tensor& t) { return scalar(v, t.dtype(), t.device()); }
}  // namespace

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator-(const Tensor& a) { return neg(a); }
Tensor operator+(const Tensor& a, double b) { return add(a, scalar_like(b, a)); }
Tensor operator-(const Tensor& a, double b) { return sub(a, scalar_like(b, a)); }
Tensor operator*(const Tensor& a, double b) { return mul(a, scalar_like(b, a)); }
Tensor operator/(const Tensor& a, double b) { return div(a, scalar_like(b, a)); }
Tensor operator+(double a, const Tensor& b) { return add(scalar_like(a, b), b); }
Tensor operator-(double a, const Tensor& b) { return sub(scalar_like(a, b), b); }
Tensor operator*(double a, const Tensor& b) { return mul(scalar_like(a, b), b); }
Tensor operator/(double a, const Tensor& b) { return div(scalar_like(a, b), b); }

}  // namespace kiln
