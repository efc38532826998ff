#include "kiln/base/reduce_op.h"

namespace kiln {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum: return "sum";
    case ReduceOp::max: return "max";
    case ReduceOp::avg: return "avg";
  }
  return "sum";
}

}  // namespace kiln
