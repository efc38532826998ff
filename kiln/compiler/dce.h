// Dead-code elimination.
#pragma once
#include "kiln/ir/graph.h"

namespace kiln::compiler {

// Drops every node none of whose outputs reaches a graph output. Nodes with
// side effects (collectives) are always kept, with everything they read.
// Values are renumbered densely (inputs, then node outputs in order), so the
// printed graph is tidy. Graph inputs are kept even when unused: they are
// the caller's calling convention.
ir::Graph dce(const ir::Graph& g);

}  // namespace kiln::compiler
