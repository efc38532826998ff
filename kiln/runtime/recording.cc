#include "kiln/runtime/recording.h"

#include "kiln/base/error.h"
#include "kiln/runtime/dispatch.h"
#include "kiln/runtime/kernel.h"
#include "kiln/runtime/region.h"
#include "kiln/runtime/rules.h"
#include "kiln/runtime/view_chain.h"

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
  TensorImpl& impl = t.impl();
  if (impl.recording.get() != this) return capture(t);
  if (impl.view_base) {  // re-derive a view whose base was written since
    ir::ValueId base = value_of(Tensor(impl.view_base));
    if (base != impl.view_source) {
      impl.value = graph.add_node(*impl.view_op, {base}, impl.view_attrs).outputs[0];
      if (!current_region().empty()) graph.tag_last_node(current_region());
      impl.view_source = base;
    }
  }
  return impl.value;
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
  const ir::Node& n = rec_->graph.add_node_typed(op, ids, attrs, out_types);
  if (!current_region().empty()) rec_->graph.tag_last_node(current_region());
  std::vector<Tensor> out;
  for (ir::ValueId v : n.outputs) out.push_back(rec_->tensor(v, device));
  if (op.view && inputs.size() == 1) note_view(out[0].impl(), inputs[0], ids[0], op, attrs);
  return out;
}

void TraceContext::check_writable(const TensorImpl& dst) const {
  for (const TensorImpl* v = &dst; v->view_base; v = v->view_base.get())
    KILN_CHECK(v->view_op->view_scatter, "an in-place write inside a traced function goes "
               "through a '", v->view_op->name, "' view, which cannot be written through; write "
               "into a copy instead");
  const TensorImpl& root = chain_root(dst);
  const char* through = &root == &dst ? "" : " (through a view)";
  KILN_CHECK(root.recording == rec_, "an in-place write inside a traced function", through,
             " targets a tensor created outside it; pass that tensor as an argument and return "
             "the updated value");
  KILN_CHECK(rec_->graph.values()[size_t(root.value)].node >= 0, "an in-place write inside a "
             "traced function (compile, value_and_grad)", through, " targets one of its "
             "arguments, which is not written back; write into a copy (y = zeros_like(x); "
             "y.copy_(x)) and return it");
}

// A write through a view becomes a functional update of its base (the view
// op's scatter rule), applied down the chain to the root; the base's other
// views see it because they are re-derived when read (Recording::value_of).
void TraceContext::assign(const Tensor& dst, const Tensor& value) {
  TensorImpl& impl = dst.impl();
  check_writable(impl);
  // Read before the base changes: `value` may be another view of it.
  ir::ValueId written = rec_->value_of(value);
  if (impl.view_base) {
    Tensor base(impl.view_base);
    ViewScatterCall call{base, value, impl.view_attrs, {}};
    impl.view_op->view_scatter(call);
    assign(base, call.result);
    impl.view_source = rec_->value_of(base);
  }
  impl.value = written;
}

void TraceContext::materialize(const Tensor& t) {
  fail("reading the value of a ", ir::to_string(t.type()),
       " tensor inside a traced function (value_and_grad, compile): values do not exist until "
       "the graph runs; return the tensor from the function and read it afterwards");
}

}  // namespace kiln
