// Pending views (traces, defer_and_fuse) remember their base, view op and
// attributes (TensorImpl::view_base...), so that a write through a view can
// become a functional update of its base (the view op's scatter rule) and a
// view read after its base was written is re-derived from the new base.
#pragma once
#include <optional>

#include "kiln/ir/op.h"
#include "kiln/runtime/tensor.h"

namespace kiln {

// The first tensor of `view`'s chain of bases (itself when not a view).
const TensorImpl& chain_root(const TensorImpl& view);

// The layout `view` has over its root's buffer, or nullopt when some step
// needs a copy (reshaping a transpose): then it is not an alias of the root.
// A pending root is a fresh contiguous buffer.
std::optional<ir::Layout> chain_layout(const TensorImpl& view);

// Makes the pending output `out` of view op `op` on `input` remember its base,
// unless the view needs a copy, as in eager mode.
void note_view(TensorImpl& out, const Tensor& input, ir::ValueId input_value, const ir::OpDef& op,
               const ir::Attrs& attrs);

}  // namespace kiln
