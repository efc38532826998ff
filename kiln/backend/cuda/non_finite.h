// Debug mode's NaN/Inf check on the device: one pass over the tensor finds
// the first non-finite element's flat position; only that verdict is copied
// to the host. Runs on the device's queue thread and waits for its answer.
#pragma once
#include "kiln/runtime/backend.h"

namespace kiln::cuda {

NonFinite find_non_finite(const TensorRef& t);

}  // namespace kiln::cuda
