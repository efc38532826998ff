// Model regions: a name (e.g. "layers.3") that nodes traced while a
// RegionGuard is alive carry in the IR (ir::Node::region). Models mark their
// repeated blocks with it; per-block compile (run_graph_compiling_regions)
// and the activation-memory policy work region by region. Regions nest by
// replacement: the innermost guard's name is the current one. Backward
// nodes go to ir::backward_region(name) (kiln/ir/region.h).
#pragma once
#include <string>

namespace kiln {

class RegionGuard {
 public:
  explicit RegionGuard(std::string name);
  ~RegionGuard();
  RegionGuard(const RegionGuard&) = delete;
  RegionGuard& operator=(const RegionGuard&) = delete;

 private:
  std::string previous_;
};

// The thread's current region; empty outside every guard.
const std::string& current_region();

}  // namespace kiln
