// The eager contexts: strict (asynchronous, on the device queue) and debug
// (synchronous, with NaN/Inf checks naming the op and its position).
#pragma once
#include "kiln/runtime/context.h"

namespace kiln {

// The context that runs ops now, in the given mode.
Context& eager_context(EagerMode mode);

enum class Pool;
// A dense tensor of `type` on `device` whose buffer comes from `pool`,
// its contents not yet written.
Tensor new_tensor(const ir::TypeInfo& type, Device device, Pool pool);

}  // namespace kiln
