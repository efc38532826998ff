// The silu_mul op (the SwiGLU activation silu(gate) * up) and its backward
// op: declarations, composites and the vjp rule. Both are opaque to the
// compiler's elementwise fusion (they are fused kernels already, and the
// fused-kernel generator knows only the basic elementwise ops).
#include "kiln/ops/compute_dtype.h"
#include "kiln/ops/declare.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/fused_kernels.h"

namespace kiln {
namespace ops {
namespace {

void check_pair(const char* op, const TypeInfo& a, const TypeInfo& b) {
  KILN_CHECK(is_floating(a.dtype) && a == b, op,
             ": gate and up must be floating tensors of one shape and dtype, got ",
             ir::to_string(a), " and ", ir::to_string(b));
}

// Inputs gate, up, dy; outputs d gate, d up.
const OpDef& kSiluMulBackward = declare({
    .name = "silu_mul_backward",
    .num_inputs = 3,
    .infer = [](auto in, const Attrs&) {
      check_pair("silu_mul_backward", in[0], in[1]);
      check_pair("silu_mul_backward", in[0], in[2]);
      return std::vector<TypeInfo>{in[0], in[1]};
    },
    .composite = [](CompositeCall& c) {
      DType dt = c.inputs[0].dtype(), cd = compute_dtype(dt);
      Tensor a = c.inputs[0].to(cd), b = c.inputs[1].to(cd), dy = c.inputs[2].to(cd);
      Tensor s = sigmoid(a);
      // silu'(a) = s * (1 + a * (1 - s))
      c.outputs = {(dy * b * s * (1.0 + a * (1.0 - s))).to(dt), (dy * a * s).to(dt)};
    },
});

const OpDef& kSiluMul = declare({
    .name = "silu_mul",
    .num_inputs = 2,
    .infer = [](auto in, const Attrs&) {
      check_pair("silu_mul", in[0], in[1]);
      return std::vector<TypeInfo>{in[0]};
    },
    .vjp = [](VjpCall& c) {
      std::vector<Tensor> g = kiln::apply(
          kSiluMulBackward, std::vector<Tensor>{c.inputs[0], c.inputs[1], c.cot(0)});
      c.grads[0] = g[0];
      c.grads[1] = g[1];
    },
    .composite = [](CompositeCall& c) {
      DType dt = c.inputs[0].dtype(), cd = compute_dtype(dt);
      c.outputs = {(silu(c.inputs[0].to(cd)) * c.inputs[1].to(cd)).to(dt)};
    },
});

}  // namespace
}  // namespace ops

Tensor silu_mul(const Tensor& gate, const Tensor& up) {
  return apply1(ops::kSiluMul, {gate, up});
}

}  // namespace kiln
