#include "kiln/runtime/dispatch.h"

#include "kiln/base/error.h"
#include "kiln/runtime/context.h"

namespace kiln {

std::vector<Tensor> apply(const ir::OpDef& op, std::span<const Tensor> inputs,
                          const ir::Attrs& attrs, Device device) {
  ir::Attrs full = op.complete_attrs(attrs);
  std::vector<ir::TypeInfo> in_types;
  in_types.reserve(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    KILN_CHECK(inputs[i].defined(), "op '", op.name, "': input ", i, " is an undefined tensor");
    in_types.push_back(inputs[i].type());
  }
  std::vector<ir::TypeInfo> out_types = op.infer_types(in_types, full);
  if (!inputs.empty()) device = inputs[0].device();
  for (size_t i = 1; i < inputs.size(); ++i)
    KILN_CHECK(inputs[i].device() == device, "op '", op.name, "': input 0 is on ",
               to_string(device), " but input ", i, " is on ", to_string(inputs[i].device()),
               "; move one with .to(device)");
  return current_context().apply(op, inputs, full, out_types, device);
}

Tensor apply1(const ir::OpDef& op, std::span<const Tensor> inputs, const ir::Attrs& attrs,
              Device device) {
  std::vector<Tensor> out = apply(op, inputs, attrs, device);
  KILN_CHECK(out.size() == 1, "op '", op.name, "' has ", out.size(), " outputs, expected 1");
  return std::move(out[0]);
}

}  // namespace kiln
