// A graph being recorded, and the context that records into it. Tensors
// made while a TraceContext is current are pending values of its graph;
// tensors from outside that it reads become graph inputs ("captures").
#pragma once
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/runtime/context.h"

namespace kiln {

class Recording {
 public:
  ir::Graph graph;
  // captured[i] is the tensor that feeds graph input i when the graph runs.
  std::vector<Tensor> captured;
  // The context that can materialize this recording's values (defer_and_fuse),
  // or null for a trace, whose values exist only once its graph runs.
  Context* owner = nullptr;

  // A graph input standing for `t` (deduplicated by handle).
  ir::ValueId capture(const Tensor& t);
  // The value `t` has in this graph: its own if pending here (a view whose
  // base was written since is re-derived from it first), else a capture.
  ir::ValueId value_of(const Tensor& t);
  // A pending handle to value `v` of this graph.
  Tensor tensor(ir::ValueId v, Device device);

  std::shared_ptr<Recording> self() { return self_.lock(); }
  static std::shared_ptr<Recording> create();

 private:
  std::weak_ptr<Recording> self_;
  std::unordered_map<const TensorImpl*, ir::ValueId> capture_ids_;
};

class TraceContext : public Context {
 public:
  explicit TraceContext(std::shared_ptr<Recording> rec) : rec_(std::move(rec)) {}
  // With `lower_for`, ops that have no kernel on that device are recorded as
  // their composites instead (how graphs are prepared for execution).
  TraceContext(std::shared_ptr<Recording> rec, Device lower_for)
      : rec_(std::move(rec)), lower_for_(lower_for) {}
  std::vector<Tensor> apply(const ir::OpDef& op, std::span<const Tensor> inputs,
                            const ir::Attrs& attrs, std::span<const ir::TypeInfo> out_types,
                            Device device) override;
  void assign(const Tensor& dst, const Tensor& value) override;
  void materialize(const Tensor& t) override;
  const std::shared_ptr<Recording>& recording() const { return rec_; }

 private:
  // Raises unless a write into `dst` can become an update of a value of this graph.
  void check_writable(const TensorImpl& dst) const;

  std::shared_ptr<Recording> rec_;
  std::optional<Device> lower_for_;
};

// Runs every node of `g` through the current context, feeding `inputs` to
// the graph inputs; frees each value after its last use, inputs included
// (a caller that moves them in gives them up as the run goes). `label` names
// the graph in error messages (with the node's position).
std::vector<Tensor> run_graph(const ir::Graph& g, std::vector<Tensor> inputs,
                              const std::string& label);

}  // namespace kiln
