#include "kiln/runtime/recording.h"

#include "kiln/base/error.h"
#include "kiln/runtime/dispatch.h"
#include "kiln/runtime/kernel.h"
#include "kiln/runtime/region.h"
#include "kiln/runtime/rules.h"

namespace kiln {

std::shared_ptr<Recording> Recording::create() {
  auto r = std::make_shared<Recording>();
  r->self_ = r;
  return r;
}

ir::ValueId Recording::capture(const Tensor& t) {
  auto it = capture_ids_.find(t.impl_ptr().get());
  if (it != capture_ids_.end()) return it->second;
  ir::ValueId v = graph.add_input(t.type());
  captured.push_back(t);
  capture_ids_.emplace(t.impl_ptr().get(), v);
  return v;
}

ir::ValueId Recording::value_of(const Tensor& t) {
  const TensorImpl& impl = t.impl();
  if (impl.recording.get() == this) return impl.value;
  return capture(t);
}

Tensor Recording::tensor(ir::ValueId v, Device device) {
  auto impl = std::make_shared<TensorImpl>();
  impl->dtype = graph.type(v).dtype;
  impl->shape = graph.type(v).shape;
  impl->device = device;
  impl->recording = self();
  impl->value = v;
  return Tensor(std::move(impl));
}

std::vector<Tensor> TraceContext::apply(const ir::OpDef& op, std::span<const Tensor> inputs,
                                        const ir::Attrs& attrs,
                                        std::span<const ir::TypeInfo> out_types, Device device) {
  if (lower_for_ && op.composite && !find_kernel(lower_for_->kind, op.name)) {
    CompositeCall call{inputs, attrs, {}};
    op.composite(call);
    return std::move(call.outputs);
  }
  std::vector<ir::ValueId> ids;
  ids.reserve(inputs.size());
  for (const Tensor& t : inputs) ids.push_back(rec_->value_of(t));
  const ir::Node& n = rec_->graph.add_node_typed(op, std::move(ids), attrs, out_types);
  if (!current_region().empty()) rec_->graph.tag_last_node(current_region());
  std::vector<Tensor> out;
  for (ir::ValueId v : n.outputs) out.push_back(rec_->tensor(v, device));
  return out;
}

void TraceContext::assign(const Tensor& dst, const Tensor& value) {
  TensorImpl& impl = dst.impl();
  KILN_CHECK(impl.recording == rec_, "an in-place write inside a traced function targets a tensor "
             "created outside it; pass that tensor as an argument and return the updated value");
  impl.value = rec_->value_of(value);
}

void TraceContext::materialize(const Tensor& t) {
  fail("reading the value of a ", ir::to_string(t.type()),
       " tensor inside a traced function (value_and_grad, compile): values do not exist until "
       "the graph runs; return the tensor from the function and read it afterwards");
}

}  // namespace kiln
