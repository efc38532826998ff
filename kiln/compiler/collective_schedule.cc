#include "kiln/compiler/collective_schedule.h"

#include <algorithm>

#include "kiln/base/error.h"
#include "kiln/compiler/rewriter.h"

namespace kiln::compiler {
namespace {

const ir::OpDef& wait_op() {
  static const ir::OpDef& op = ir::get_op("collective_wait");
  return op;
}

// The "<op>_start" twin of a collective node, or nullptr when it has none
// (not a collective, or one already split).
const ir::OpDef* start_op_of(const ir::Node& n) {
  if (n.op->fusion != ir::FusionClass::collective || n.inputs.size() != 1 ||
      n.outputs.size() != 1)
    return nullptr;
  return ir::find_op(n.op->name + "_start");
}

bool is_start(const ir::OpDef& op) {
  const std::string& s = op.name;
  return op.fusion == ir::FusionClass::collective && s.size() > 6 &&
         s.compare(s.size() - 6, 6, "_start") == 0;
}

// Emits the new order; see the header for the rules. Compute nodes are
// copied in their order; a wait or start is emitted only after what it
// needs (its start, its input, the earlier collectives, the bounds' waits),
// so the output is always topological.
class Scheduler {
 public:
  Scheduler(const ir::Graph& g, const ScheduleOptions& o) : g_(g), o_(o), rw_(g) {
    const auto& nodes = g.nodes();
    collective_of_.assign(nodes.size(), -1);
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (const ir::OpDef* s = start_op_of(nodes[i])) {
        collective_of_[i] = int(coll_.size());
        coll_.push_back(int(i));
        start_ops_.push_back(s);
      }
    }
    emitted_.assign(nodes.size(), false);
    started_.assign(coll_.size(), -1);
  }

  ir::Graph run() {
    const auto& nodes = g_.nodes();
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (collective_of_[i] >= 0) continue;
      start_ready();  // what the previous node made ready
      for (ir::ValueId v : nodes[i].inputs) need(v);
      start_ready();  // gathers the waits just placed let start
      rw_.copy(nodes[i]);
      emitted_[i] = true;
      ++computed_;
    }
    wait_through(int(coll_.size()) - 1);
    return rw_.finish();
  }

 private:
  int producer_of(ir::ValueId v) const { return g_.values()[v].node; }
  bool grows(int k) const {
    const ir::Node& n = g_.nodes()[coll_[k]];
    return g_.type(n.outputs[0]).shape.numel() > g_.type(n.inputs[0]).shape.numel();
  }

  // Makes value v (of the old graph) available in the new one.
  void need(ir::ValueId v) {
    int p = producer_of(v);
    if (p < 0) return;
    if (collective_of_[p] >= 0) return wait_through(collective_of_[p]);
    KILN_CHECK(emitted_[p], "schedule_collectives: node ", p, " is needed before it is emitted");
  }

  void start_through(int k) {
    while (next_start_ <= k) {
      int j = next_start_;
      const ir::Node& n = g_.nodes()[coll_[j]];
      need(n.inputs[0]);
      if (grows(j) && j >= o_.prefetch) wait_through(j - o_.prefetch);
      if (j >= o_.max_in_flight) wait_through(j - o_.max_in_flight);
      if (next_start_ != j) continue;  // started while waiting above
      std::vector<ir::TypeInfo> types{g_.type(n.outputs[0])};
      started_[j] = rw_.graph().add_node_typed(*start_ops_[j], rw_.map(n.inputs), n.attrs, types)
                        .outputs[0];
      started_at_.push_back(computed_);
      ++next_start_;
    }
  }

  void wait_through(int k) {
    while (next_wait_ <= k) {
      int j = next_wait_;
      start_through(j);
      if (next_wait_ != j) continue;
      const ir::Node& n = g_.nodes()[coll_[j]];
      std::vector<ir::TypeInfo> types{g_.type(n.outputs[0])};
      const ir::Node& w =
          rw_.graph().add_node_typed(wait_op(), {started_[j], rw_[n.inputs[0]]}, {}, types);
      rw_.alias(n.outputs[0], w.outputs[0]);
      ++next_wait_;
    }
  }

  // Starts every collective that may start now (in order, stopping at the
  // first that may not): its input computed (or the result of a collective
  // that has overlapped at least one compute node: it is waited for now),
  // and a gather's prefetch distance respected.
  void start_ready() {
    while (next_start_ < int(coll_.size())) {
      int j = next_start_;
      int p = producer_of(g_.nodes()[coll_[j]].inputs[0]);
      if (p >= 0 && collective_of_[p] < 0 && !emitted_[p]) return;
      if (p >= 0 && collective_of_[p] >= next_wait_ && started_at_[collective_of_[p]] == computed_)
        return;
      if (grows(j) && j >= o_.prefetch && next_wait_ <= j - o_.prefetch) return;
      start_through(j);
    }
  }

  const ir::Graph& g_;
  ScheduleOptions o_;
  Rewriter rw_;
  std::vector<int> coll_;                   // the collective nodes, in order
  std::vector<const ir::OpDef*> start_ops_; // per collective
  std::vector<int> collective_of_;          // per node: its collective index, or -1
  std::vector<bool> emitted_;               // per node (compute nodes)
  std::vector<ir::ValueId> started_;        // per collective: the new start's output
  std::vector<int> started_at_;             // per started collective: computed_ then
  int computed_ = 0;                        // compute nodes emitted
  int next_start_ = 0, next_wait_ = 0;
};

}  // namespace

bool is_collective_wait(const ir::OpDef& op) { return &op == &wait_op(); }

ir::Graph schedule_collectives(const ir::Graph& g, const ScheduleOptions& options) {
  KILN_CHECK(options.prefetch >= 1 && options.max_in_flight >= options.prefetch,
             "schedule_collectives: need 1 <= prefetch (", options.prefetch,
             ") <= max_in_flight (", options.max_in_flight, ")");
  bool any = false, compute = false;
  for (const ir::Node& n : g.nodes()) {
    // Already scheduled (a program optimized twice): leave it as it is.
    if (is_start(*n.op) || is_collective_wait(*n.op)) return g;
    (start_op_of(n) ? any : compute) = true;
  }
  // Nothing to overlap (no collective, or collectives alone: a skinny
  // collective's program): the blocking kernels.
  if (!any || !compute) return g;
  return Scheduler(g, options).run();
}

}  // namespace kiln::compiler
