// Fusion: connected elementwise nodes, with an optional final reduction,
// become one "fused" node (see fused_op.h) that a backend runs as one kernel.
// Compiler-made fusion, not the hand-written fused kernels of
// kiln/ops/fused_kernels.h (docs/architecture.md, "Two kinds of fused").
#pragma once
#include "kiln/ir/graph.h"

namespace kiln::compiler {

// Groups nodes of FusionClass::elementwise whose outputs all have the same
// shape (the group's iteration space; inputs may broadcast to it) and that
// are connected through their values, plus at most one sum/max/min/mean
// consuming a group value (the group then has kind "reduction"; no member
// may read the reduction, so its consumers start a new group). `full`
// constants are never group members: each group that reads one gets its
// own copy in its body, at the iteration shape, so constants cost no
// memory traffic; an original left with no readers is dropped.
//
// A group's outputs are the values read outside it or returned by the
// graph. Groups never create cycles, also not between groups: merging is
// checked against a topological order of the groups formed so far (see
// fuse.cc). Side-effecting nodes also depend on the previous one, so
// collectives keep their order. Groups of one node stay as they are. The
// result is in a valid order and every graph output keeps its type.
//
// A widening cast (its result has more bytes per element than its input;
// bf16 -> f32) that is not returned and whose readers all fuse with it is
// recomputed in each reader's group from the narrower input rather than
// written once and read back wide: gradient clipping reads each bf16
// gradient as f32 in the norm and again in the optimizer update, and so
// never materialises the f32 gradients.
ir::Graph fuse(const ir::Graph& g);

}  // namespace kiln::compiler
