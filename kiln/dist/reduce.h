// The arithmetic of reducing collectives, done locally and in a fixed order
// so that results never depend on timing, the backend's algorithm or the
// number of processes: what a single process computes in a plain loop.
#pragma once
#include <cstdint>
#include <span>

#include "kiln/base/dtype.h"
#include "kiln/dist/process_group.h"

namespace kiln::dist {

// out[i] = parts[0][i] op parts[1][i] op ... op parts[n-1][i], left to
// right; bf16/f16 accumulate in f32 and round once, avg divides by n.
// out may alias parts[0].
void reduce_in_order(void* out, std::span<const void* const> parts, int64_t count, DType dtype,
                     ReduceOp op);

}  // namespace kiln::dist
