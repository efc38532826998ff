// Algebraic simplification.
#pragma once
#include "kiln/ir/graph.h"

namespace kiln::compiler {

// Rewrites, repeated to a fixed point, then DCE:
//  - identity ops become their input: copy; reshape, expand, slice and cast
//    whose output type equals the input's; permute by the identity;
//  - permute(permute(x)) -> one permute (none when the composition is the
//    identity); reshape of reshape/squeeze/unsqueeze -> one reshape of x;
//  - cast(cast(x, T), dtype(x)) -> x when T holds every value of dtype(x)
//    exactly (f32->f64->f32, bf16->f32->bf16; not f32->bf16->f32);
//  - x*1, 1*x, x/1, x+0, 0+x, x-0 -> x, where the constant is a `full` node
//    (possibly seen through view ops) and the result type equals x's type;
//  - neg(neg(x)) -> x.
// Every rewrite keeps values bit-identical except x+0 with x = -0.0, which
// yields +0.0 (equal as numbers; only the sign of zero differs).
ir::Graph simplify(const ir::Graph& g);

}  // namespace kiln::compiler
