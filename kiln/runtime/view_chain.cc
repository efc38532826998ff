#include "kiln/runtime/view_chain.h"

namespace kiln {

const TensorImpl& chain_root(const TensorImpl& view) {
  return view.view_base ? chain_root(*view.view_base) : view;
}

std::optional<ir::Layout> chain_layout(const TensorImpl& view) {
  if (!view.view_base) {
    if (view.materialized()) return ir::Layout{view.shape, view.strides, view.offset};
    return ir::Layout{view.shape, contiguous_strides(view.shape), 0};
  }
  std::optional<ir::Layout> base = chain_layout(*view.view_base);
  if (!base) return std::nullopt;
  return view.view_op->view(*base, view.view_attrs);
}

void note_view(TensorImpl& out, const Tensor& input, ir::ValueId input_value, const ir::OpDef& op,
               const ir::Attrs& attrs) {
  out.view_base = input.impl_ptr();
  out.view_op = &op;
  out.view_attrs = attrs;
  out.view_source = input_value;
  if (!chain_layout(out)) {
    out.view_base.reset();
    out.view_op = nullptr;
  }
}

}  // namespace kiln
