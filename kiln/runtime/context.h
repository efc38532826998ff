// Execution contexts. Every op call ends in the current context, which runs
// it (strict, debug), records it (a trace; later defer_and_fuse) or rejects
// it. Contexts stack per thread: a trace pushed inside strict eager records
// until it is popped.
#pragma once
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kiln/ir/op.h"
#include "kiln/runtime/tensor.h"

namespace kiln {

class Context {
 public:
  virtual ~Context() = default;
  // Runs or records `op`; `attrs` are complete and `out_types` inferred.
  virtual std::vector<Tensor> apply(const ir::OpDef& op, std::span<const Tensor> inputs,
                                    const ir::Attrs& attrs, std::span<const ir::TypeInfo> out_types,
                                    Device device) = 0;
  // Makes `dst` hold `value` (same type): the in-place write primitive.
  virtual void assign(const Tensor& dst, const Tensor& value) = 0;
  // Makes a pending tensor materialized, or explains why it cannot be.
  virtual void materialize(const Tensor& t) = 0;
};

enum class EagerMode { strict, debug, defer_and_fuse };
const char* eager_mode_name(EagerMode m);
EagerMode parse_eager_mode(std::string_view s);

// The thread's eager mode: KILN_EAGER_MODE at start-up, or the innermost guard.
EagerMode eager_mode();

class EagerModeGuard {
 public:
  explicit EagerModeGuard(EagerMode mode);
  ~EagerModeGuard();
  EagerModeGuard(const EagerModeGuard&) = delete;
  EagerModeGuard& operator=(const EagerModeGuard&) = delete;

 private:
  EagerMode previous_;
};

// Installs `ctx` as the thread's current context for the guard's lifetime.
class ContextGuard {
 public:
  explicit ContextGuard(std::shared_ptr<Context> ctx);
  ~ContextGuard();
  ContextGuard(const ContextGuard&) = delete;
  ContextGuard& operator=(const ContextGuard&) = delete;
};

Context& current_context();

// Makes `t` materialized: a pending value is materialized by the context
// that recorded it (or the current one explains why it cannot be).
void ensure_materialized(const Tensor& t);

// Where the op being run sits, for error messages: a graph position while a
// graph is replayed, otherwise the eager op count.
class OpPositionGuard {
 public:
  explicit OpPositionGuard(std::string position);
  ~OpPositionGuard();
  OpPositionGuard(const OpPositionGuard&) = delete;
  OpPositionGuard& operator=(const OpPositionGuard&) = delete;

 private:
  std::string previous_;
};
const std::string& current_op_position();

}  // namespace kiln
