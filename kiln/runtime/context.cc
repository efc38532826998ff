#include "kiln/runtime/context.h"

#include <cstdlib>
#include <optional>

#include "kiln/base/error.h"
#include "kiln/runtime/eager.h"
#include "kiln/runtime/recording.h"

namespace kiln {
namespace {

EagerMode initial_mode() {
  const char* env = std::getenv("KILN_EAGER_MODE");
  return env && *env ? parse_eager_mode(env) : EagerMode::strict;
}

// Unset until first read, so a bad KILN_EAGER_MODE raises a normal error
// from the first op rather than terminating in thread start-up.
thread_local std::optional<EagerMode> t_mode;
thread_local std::vector<std::shared_ptr<Context>> t_stack;
thread_local std::string t_position;

}  // namespace

const char* eager_mode_name(EagerMode m) {
  switch (m) {
    case EagerMode::strict: return "strict";
    case EagerMode::debug: return "debug";
    case EagerMode::defer_and_fuse: return "defer_and_fuse";
  }
  return "?";
}

EagerMode parse_eager_mode(std::string_view s) {
  for (EagerMode m : {EagerMode::strict, EagerMode::debug, EagerMode::defer_and_fuse})
    if (s == eager_mode_name(m)) return m;
  fail("unknown eager mode '", s, "' (KILN_EAGER_MODE): use strict, debug or defer_and_fuse");
}

EagerMode eager_mode() {
  if (!t_mode) t_mode = initial_mode();
  return *t_mode;
}

EagerModeGuard::EagerModeGuard(EagerMode mode) : previous_(eager_mode()) { t_mode = mode; }
EagerModeGuard::~EagerModeGuard() { t_mode = previous_; }

ContextGuard::ContextGuard(std::shared_ptr<Context> ctx) { t_stack.push_back(std::move(ctx)); }
ContextGuard::~ContextGuard() { t_stack.pop_back(); }

Context& current_context() {
  if (!t_stack.empty()) return *t_stack.back();
  return eager_context(eager_mode());
}

void ensure_materialized(const Tensor& t) {
  const TensorImpl& impl = t.impl();
  if (impl.materialized()) return;
  if (impl.recording && impl.recording->owner) impl.recording->owner->materialize(t);
  else current_context().materialize(t);
}

OpPositionGuard::OpPositionGuard(std::string position) : previous_(std::move(t_position)) {
  t_position = std::move(position);
}
OpPositionGuard::~OpPositionGuard() { t_position = std::move(previous_); }
const std::string& current_op_position() { return t_position; }

}  // namespace kiln
