// The defer_and_fuse eager mode: ops are recorded into a pending region
// instead of running. At a materialization point (item(), a host copy,
// printing, an explicit kiln::eval, or an eager op reading a pending value)
// the region is compiled as one program through the compile cache and run;
// the values still held by the user (handle reference counts) are its
// outputs, everything else is dead. A repeated op sequence (a stack of
// identical blocks) flushes at each block boundary, so regions stay small
// and every block after the first hits the cache. Outside an SPMD-safe
// scope a collective also cuts the region and runs alone (spmd.h).
#pragma once
#include <cstddef>
#include <vector>

#include "kiln/runtime/context.h"

namespace kiln {

// The thread's defer_and_fuse context.
Context& defer_context();

// Materializes the given tensors (and every other pending value still held).
void eval(const std::vector<Tensor>& tensors);

struct DeferStats {
  size_t flushes = 0;          // regions compiled and run
  size_t ops_recorded = 0;     // ops recorded in total
  size_t repeat_flushes = 0;   // flushes caused by the repeated-sequence heuristic
  size_t last_region_ops = 0;  // nodes in the last region flushed
  size_t last_region_outputs = 0;
  size_t skinny_collectives = 0;  // collectives run as one-op programs (spmd.h)
};
DeferStats defer_stats();
void reset_defer_stats();

}  // namespace kiln
