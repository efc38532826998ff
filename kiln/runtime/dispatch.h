// The one entry point of every op: validates attributes, runs the shape rule
// (so shape errors surface at the call, in any mode) and hands the op to the
// current context.
#pragma once
#include <span>
#include <string_view>
#include <vector>

#include "kiln/ir/op.h"
#include "kiln/runtime/tensor.h"

namespace kiln {

// `device` places ops without inputs (full, arange, random); ops with inputs
// run where their inputs live.
std::vector<Tensor> apply(const ir::OpDef& op, std::span<const Tensor> inputs,
                          const ir::Attrs& attrs = {}, Device device = kCPU);
Tensor apply1(const ir::OpDef& op, std::span<const Tensor> inputs, const ir::Attrs& attrs = {},
              Device device = kCPU);
inline Tensor apply1(const ir::OpDef& op, std::initializer_list<Tensor> inputs,
                     const ir::Attrs& attrs = {}, Device device = kCPU) {
  return apply1(op, std::span<const Tensor>(inputs.begin(), inputs.size()), attrs, device);
}

// Looks an op up by name once and keeps the reference.
#define KILN_OP(name)                                               \
  ([]() -> const ::kiln::ir::OpDef& {                               \
    static const ::kiln::ir::OpDef& op = ::kiln::ir::get_op(name);  \
    return op;                                                      \
  }())

}  // namespace kiln
