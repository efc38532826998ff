// The eager contexts: strict (asynchronous, on the device queue) and debug
// (synchronous, with NaN/Inf checks naming the op and its position).
#pragma once
#include "kiln/runtime/context.h"

namespace kiln {

// The context that runs ops now, in the given mode.
Context& eager_context(EagerMode mode);

}  // namespace kiln
