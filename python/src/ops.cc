// The op registry as Python sees it: every op's schema (op_defs), and one
// generic call (apply) that validates the keyword attributes against the
// schema and dispatches. kiln.ops builds its functions from these, so a new
// op needs no binding.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "kiln/base/error.h"
#include "kiln/ir/op.h"
#include "kiln/runtime/dispatch.h"
#include "python/src/bindings.h"

namespace kiln::python {
namespace {

using ir::AttrKind;
using ir::AttrValue;

nb::object attr_to_python(const AttrValue& v) {
  return std::visit([](const auto& x) -> nb::object { return nb::cast(x); }, v);
}

// A Python value as the attribute kind the schema gives (or, for a name the
// op does not have, as its own kind, so that complete_attrs names the
// unknown attribute).
AttrValue attr_from_python(const ir::OpDef& op, const std::string& name, nb::handle v) {
  std::optional<AttrKind> kind;
  for (const ir::AttrSpec& s : op.attrs)
    if (s.name == name) kind = s.kind;
  auto wrong = [&](const char* expected) {
    return Error(cat(op.name, ": attribute '", name, "' takes ", expected, ", not ",
                     nb::cast<std::string>(nb::repr(v))));
  };
  if (!kind) {
    if (nb::isinstance<nb::bool_>(v)) kind = AttrKind::bool_;
    else if (nb::isinstance<nb::int_>(v)) kind = AttrKind::int_;
    else if (nb::isinstance<nb::float_>(v)) kind = AttrKind::float_;
    else if (nb::isinstance<nb::str>(v)) kind = AttrKind::string;
    else if (nb::isinstance<DType>(v)) kind = AttrKind::dtype;
    else kind = AttrKind::ints;
  }
  switch (*kind) {
    case AttrKind::bool_:
      if (!nb::isinstance<nb::bool_>(v)) throw wrong("a bool");
      return nb::cast<bool>(v);
    case AttrKind::int_:
      if (nb::isinstance<nb::bool_>(v) || !nb::isinstance<nb::int_>(v)) throw wrong("an int");
      return nb::cast<int64_t>(v);
    case AttrKind::float_:
      if (nb::isinstance<nb::bool_>(v) ||
          !(nb::isinstance<nb::float_>(v) || nb::isinstance<nb::int_>(v)))
        throw wrong("a number");
      return nb::cast<double>(v);
    case AttrKind::string:
      if (!nb::isinstance<nb::str>(v)) throw wrong("a str");
      return nb::cast<std::string>(v);
    case AttrKind::dtype:
      return to_dtype(v);
    case AttrKind::ints:
      if (nb::isinstance<nb::int_>(v)) return ir::IntList{nb::cast<int64_t>(v)};
      try {
        return nb::cast<ir::IntList>(v);
      } catch (const nb::cast_error&) {
        throw wrong("a sequence of ints");
      }
  }
  throw wrong("a value");
}

}  // namespace

void bind_ops(nb::module_& m) {
  m.def("op_defs", [] {
    nb::list out;
    for (const ir::OpDef* op : ir::all_ops()) {
      nb::list attrs;
      for (const ir::AttrSpec& s : op->attrs)
        attrs.append(nb::make_tuple(s.name, ir::attr_kind_name(s.kind),
                                    s.default_value ? attr_to_python(*s.default_value) : nb::none(),
                                    !s.default_value.has_value()));
      out.append(nb::make_tuple(op->name, op->num_inputs, attrs, bool(op->vjp),
                                ir::fusion_class_name(op->fusion), op->side_effects));
    }
    return out;
  }, "Every registered op: (name, number of inputs (-1: any), [(attribute, kind, default, "
     "required)], differentiable, fusion class, side effects).");

  m.def("apply", [](const std::string& name, const std::vector<Tensor>& inputs,
                    const nb::dict& attrs, nb::handle device) -> nb::object {
    const ir::OpDef& op = ir::get_op(name);
    ir::Attrs a;
    for (auto [k, v] : attrs) {
      std::string key = nb::cast<std::string>(k);
      a.set(key, attr_from_python(op, key, v));
    }
    Device d = to_device(device);
    std::vector<Tensor> out;
    {
      nb::gil_scoped_release nogil;
      out = kiln::apply(op, inputs, a, d);
    }
    if (out.size() == 1) return nb::cast(out[0]);
    return nb::tuple(tensor_list(out));
  }, nb::arg("op"), nb::arg("inputs"), nb::arg("attrs"), nb::arg("device") = nb::none(),
     "Runs op `op` on `inputs` with attributes `attrs` (checked against its schema) in the "
     "current context; one output is returned as is, several as a tuple.");
}

}  // namespace kiln::python
