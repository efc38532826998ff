#include "kiln/runtime/spmd.h"

#include <algorithm>
#include <utility>

namespace kiln {
namespace {

thread_local bool t_spmd_safe = false;

}  // namespace

bool is_collective(const ir::OpDef& op) { return op.fusion == ir::FusionClass::collective; }

bool has_collective(const ir::Graph& g) {
  return std::any_of(g.nodes().begin(), g.nodes().end(),
                     [](const ir::Node& n) { return is_collective(*n.op); });
}

bool spmd_safe() { return t_spmd_safe; }

SpmdSafeGuard::SpmdSafeGuard(bool safe) : previous_(std::exchange(t_spmd_safe, safe)) {}
SpmdSafeGuard::~SpmdSafeGuard() { t_spmd_safe = previous_; }

}  // namespace kiln
