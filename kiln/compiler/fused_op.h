// The op "fused": a group of elementwise nodes, optionally ending in one
// reduction, that the compiler's fusion (fuse.h) made and a backend runs as
// one kernel; not a hand-written fused kernel (kiln/ops/fused_kernels.h).
// Attributes:
//   body: the IR text of the group as a graph; its inputs are the fused
//         node's inputs in order, its outputs the fused node's outputs;
//   kind: "elementwise": every body node is an elementwise op whose output
//         has the iteration shape (body inputs broadcast to it);
//         "reduction": the same, then one sum/max/min/mean as the last body
//         node, reducing a value of the iteration shape over any axes.
// The op's shape rule checks this, so kernels can rely on it.
#pragma once
#include <memory>
#include <string>

#include "kiln/ir/graph.h"

namespace kiln::compiler {

const ir::OpDef& fused_op();

// True for the reductions a fused group may end in (sum, max, min, mean):
// one accumulator per output element. Other reduction-class ops (softmax,
// var, argmax, logsumexp) are not fused.
bool is_fusable_reduction(const ir::OpDef& op);

// The verified body graph of a fused node. Parsed once per distinct text and
// shared (thread-safe cache); the graph is immutable.
std::shared_ptr<const ir::Graph> fused_body(const std::string& body);
// A copy of the same, for callers that want to own it.
ir::Graph parse_fused_body(const std::string& body);

}  // namespace kiln::compiler
