// The region ops have no kernels: enter is the identity (a view in eager
// modes, dropped when a program is lowered) and leave is its composite, an
// all_reduce, so every backend that runs collectives runs them; only their
// vjp rules are their own.
#include "kiln/ops/parallel_region.h"

#include "kiln/ops/declare.h"

namespace kiln {
namespace ops {
namespace {

std::vector<ir::AttrSpec> axis_attrs() {
  return {{"mesh_axis", AttrKind::string, std::nullopt},
          {"group_size", AttrKind::int_, std::nullopt}};
}

MeshAxis axis_of(const Attrs& a) { return {a.s("mesh_axis"), a.i("group_size")}; }

ir::Attrs attrs_of(const MeshAxis& axis) {
  return {{"mesh_axis", axis.name}, {"group_size", axis.size}};
}

std::vector<TypeInfo> check_region(const char* op, std::span<const TypeInfo> in, const Attrs& a) {
  KILN_CHECK(!a.s("mesh_axis").empty() && a.i("group_size") >= 1, op,
             ": needs a mesh axis and a group_size >= 1, got '", a.s("mesh_axis"), "' of ",
             a.i("group_size"));
  KILN_CHECK(is_floating(in[0].dtype), op, ": needs a floating tensor, got ",
             ir::to_string(in[0]));
  return {in[0]};
}

const OpDef& kEnter = declare({
    .name = "enter_parallel_region",
    .attrs = axis_attrs(),
    .infer = [](auto in, const Attrs& a) { return check_region("enter_parallel_region", in, a); },
    .fusion = ir::FusionClass::opaque,
    .vjp = [](VjpCall& c) { c.grads[0] = all_reduce(c.cot(0), axis_of(c.attrs)); },
    .composite = [](CompositeCall& c) { c.outputs = {c.inputs[0]}; },
    .view = [](const ir::Layout& in, const Attrs&) -> std::optional<ir::Layout> { return in; },
});

const OpDef& kLeave = declare({
    .name = "leave_parallel_region",
    .attrs = axis_attrs(),
    .infer = [](auto in, const Attrs& a) { return check_region("leave_parallel_region", in, a); },
    // A collective without a kernel: eager modes and lowering run the
    // composite, an all_reduce; the class makes it one before lowering too
    // (skinny collectives, kiln/runtime/spmd.h).
    .fusion = ir::FusionClass::collective,
    .vjp = [](VjpCall& c) { c.grads[0] = c.cot(0); },
    .composite = [](CompositeCall& c) {
      c.outputs = {all_reduce(c.inputs[0], axis_of(c.attrs))};
    },
    .side_effects = true,
});

}  // namespace
}  // namespace ops

Tensor enter_parallel_region(const Tensor& x, const MeshAxis& axis) {
  return axis.size == 1 ? x : apply1(ops::kEnter, {x}, ops::attrs_of(axis));
}

Tensor leave_parallel_region(const Tensor& x, const MeshAxis& axis) {
  return axis.size == 1 ? x : apply1(ops::kLeave, {x}, ops::attrs_of(axis));
}

}  // namespace kiln
