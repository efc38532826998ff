// The optimization pipeline: simplify -> cse -> dce -> fuse -> collective
// scheduling (last: it orders the final nodes, and no later pass may merge,
// drop or reorder its starts and waits).
#pragma once
#include <string>

#include "kiln/ir/graph.h"

namespace kiln::compiler {

struct PassOptions {
  bool simplify = true;
  bool cse = true;
  bool dce = true;
  bool fuse = true;
  // Split collectives into start/wait and overlap them with compute
  // (collective_schedule.h); off: each collective blocks where it was traced.
  bool overlap_collectives = true;
};

// "simplify=1,cse=1,dce=1,fuse=1,overlap=1": part of the compile cache's options
// fingerprint, so programs built with other passes never collide.
std::string to_string(const PassOptions& o);

// Runs the enabled passes in order. Graph inputs and outputs keep their
// order, meaning and types.
ir::Graph optimize(const ir::Graph& g, const PassOptions& options);

}  // namespace kiln::compiler
