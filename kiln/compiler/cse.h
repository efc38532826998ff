// Common-subexpression elimination.
#pragma once
#include "kiln/ir/graph.h"

namespace kiln::compiler {

// Merges nodes that apply the same op to the same inputs with equal
// attributes: later duplicates are replaced by the first. Nodes with side
// effects are never merged (two all_reduces are two exchanges). Random ops
// are merged: they are pure functions of their attributes (Philox seed and
// offset), so two with equal attributes produce the same bits; distinct
// draws always carry distinct offsets. Operand order matters: add(a, b) and
// add(b, a) are not merged. Duplicates are not copied, so the result needs
// no DCE for them.
ir::Graph cse(const ir::Graph& g);

}  // namespace kiln::compiler
