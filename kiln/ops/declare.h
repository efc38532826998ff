// Helpers shared by the op-family files: common shape rules and the
// includes every declaration needs.
#pragma once
#include <vector>

#include "kiln/base/error.h"
#include "kiln/ir/op.h"
#include "kiln/runtime/dispatch.h"
#include "kiln/runtime/rules.h"

namespace kiln::ops {

using ir::AttrKind;
using ir::Attrs;
using ir::OpDef;
using ir::TypeInfo;

// Output = input 0's type (unary elementwise ops).
std::vector<TypeInfo> same_as_first(std::span<const TypeInfo> in, const Attrs&);

// Broadcast of all inputs, which must share one dtype; output of `out`
// dtype, or the inputs' dtype when `out` is not given.
TypeInfo broadcast_types(std::span<const TypeInfo> in, std::optional<DType> out = std::nullopt);

// Reduces `shape` over `axes` (empty: all axes), keeping size-1 dims if asked.
Shape reduced_shape(const Shape& shape, const std::vector<int64_t>& axes, bool keepdim,
                    const char* what);
// Sorted, normalised, de-duplicated axes (empty: all axes).
std::vector<int64_t> normalize_axes(const std::vector<int64_t>& axes, int rank, const char* what);

// Sums `grad` down to `shape` (the vjp of broadcasting).
Tensor sum_to(const Tensor& grad, const Shape& shape);

// Registers an OpDef from a static initialiser: `static const OpDef& kX = declare({...});`
inline const OpDef& declare(OpDef def) { return ir::register_op(std::move(def)); }

}  // namespace kiln::ops
