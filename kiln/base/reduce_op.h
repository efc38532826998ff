// How a collective combines the ranks' values (kiln/ops collectives, kiln/dist
// process groups).
#pragma once

namespace kiln {

enum class ReduceOp { sum, max, avg };

// "sum", "max", "avg": the collectives' IR attribute value.
const char* reduce_op_name(ReduceOp op);

}  // namespace kiln
