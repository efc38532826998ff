// Ops that make tensors from attributes: full, arange, and cast.
#include <cmath>

#include "kiln/ops/declare.h"

namespace kiln::ops {
namespace {

const OpDef& kFull = declare({
    .name = "full",
    .num_inputs = 0,
    .attrs = {{"shape", AttrKind::ints, std::nullopt},
              {"value", AttrKind::float_, std::nullopt},
              {"dtype", AttrKind::dtype, DType::f32}},
    .infer = [](auto, const Attrs& a) {
      Shape s(a.ints("shape"));
      for (int64_t d : s) KILN_CHECK(d >= 0, "full: negative size in shape ", s);
      return std::vector<TypeInfo>{{a.dtype("dtype"), s}};
    },
    .fusion = ir::FusionClass::elementwise,
});

int64_t arange_count(const Attrs& a) {
  double start = a.f("start"), stop = a.f("stop"), step = a.f("step");
  KILN_CHECK(step != 0, "arange: step must not be 0");
  double n = std::ceil((stop - start) / step);
  return n > 0 ? static_cast<int64_t>(n) : 0;
}

const OpDef& kArange = declare({
    .name = "arange",
    .num_inputs = 0,
    .attrs = {{"start", AttrKind::float_, 0.0},
              {"stop", AttrKind::float_, std::nullopt},
              {"step", AttrKind::float_, 1.0},
              {"dtype", AttrKind::dtype, DType::i64}},
    .infer = [](auto, const Attrs& a) {
      KILN_CHECK(a.dtype("dtype") != DType::b8, "arange: dtype bool is not supported");
      return std::vector<TypeInfo>{{a.dtype("dtype"), Shape{arange_count(a)}}};
    },
    .fusion = ir::FusionClass::elementwise,
});

const OpDef& kCast = declare({
    .name = "cast",
    .attrs = {{"dtype", AttrKind::dtype, std::nullopt}},
    .infer = [](auto in, const Attrs& a) {
      return std::vector<TypeInfo>{{a.dtype("dtype"), in[0].shape}};
    },
    .fusion = ir::FusionClass::elementwise,
    .vjp = [](VjpCall& c) {
      if (is_floating(c.inputs[0].dtype())) c.grads[0] = c.cot(0).to(c.inputs[0].dtype());
    },
});

}  // namespace
}  // namespace kiln::ops
