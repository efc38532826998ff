#include "kiln/compiler/fuse.h"

#include <algorithm>
#include <unordered_map>

#include "kiln/base/error.h"
#include "kiln/compiler/fused_op.h"
#include "kiln/compiler/rewriter.h"

namespace kiln::compiler {
namespace {

using ir::ValueId;

bool is_constant(const ir::Node& n) { return n.op->name == "full"; }

bool is_member_candidate(const ir::Node& n) {
  return n.op->fusion == ir::FusionClass::elementwise && !n.op->side_effects &&
         n.outputs.size() == 1 && !is_constant(n);
}

bool is_reduction_candidate(const ir::Node& n) {
  return is_fusable_reduction(*n.op) && !n.op->side_effects && n.inputs.size() == 1 &&
         n.outputs.size() == 1;
}

// A unit of the condensed graph: one node, or a group of nodes that will be
// one fused node.
struct Unit {
  std::vector<int> members;  // in no particular order
  bool group = false;        // elementwise nodes (and maybe a final reduction)
  Shape shape;               // a group's iteration space
  int reduction = -1;        // a group's final reduction node, if any
};

// Groups are formed walking the nodes in order. Every node processed so far
// belongs to a unit, and `order_` lists the units in an order that is
// topological for the condensed graph (each unit after every unit it reads).
// Merging unit X with an earlier unit Y is legal exactly when X does not
// depend on a unit between them that depends on Y (else the merged unit would
// come both before and after it); those units then move after the merged
// unit, keeping the order topological. So the graph of units never has a
// cycle, however groups interleave.
class Fuser {
 public:
  explicit Fuser(const ir::Graph& g);
  ir::Graph run();

 private:
  int find(int n);
  bool try_merge(int x, int y);
  void add_node(int i);
  void emit_group(Rewriter& rw, int root);

  const ir::Graph& g_;
  const std::vector<ir::Node>& nodes_;
  // The nodes each node must follow: producers of its inputs and, for a
  // side-effecting node, the previous side-effecting node (so collectives
  // keep their order). `users_` is the reverse.
  std::vector<std::vector<int>> deps_, users_;
  std::vector<int> parent_;  // union-find over processed nodes; roots name units
  std::vector<Unit> units_;  // valid at roots
  std::vector<int> order_;   // unit roots, topologically
  std::vector<int> pos_;     // a root's index in order_
  std::vector<int> mark_;    // visit stamps, per root
  int stamp_ = 0;
  int processed_ = 0;        // nodes [0, processed_) have units
  std::vector<int> fused_root_;     // per node: its unit when that is a fused group, else -1
  std::vector<bool> used_outside_;  // per value: read by another unit, or returned
};

Fuser::Fuser(const ir::Graph& g)
    : g_(g), nodes_(g.nodes()), deps_(nodes_.size()), users_(nodes_.size()),
      parent_(nodes_.size(), -1), units_(nodes_.size()), pos_(nodes_.size(), -1),
      mark_(nodes_.size(), 0), fused_root_(nodes_.size(), -1) {
  int last_effect = -1;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    for (ValueId v : nodes_[i].inputs) {
      int p = g.values()[v].node;
      if (p >= 0 && std::find(deps_[i].begin(), deps_[i].end(), p) == deps_[i].end())
        deps_[i].push_back(p);
    }
    if (nodes_[i].op->side_effects) {
      if (last_effect >= 0 && std::find(deps_[i].begin(), deps_[i].end(), last_effect) == deps_[i].end())
        deps_[i].push_back(last_effect);
      last_effect = int(i);
    }
    for (int p : deps_[i]) users_[p].push_back(int(i));
  }
}

int Fuser::find(int n) {
  while (parent_[n] != n) n = parent_[n] = parent_[parent_[n]];
  return n;
}

// Merges units `x` and `y` when legal (see the class comment); the merged
// unit keeps the earlier one's root.
bool Fuser::try_merge(int x, int y) {
  if (pos_[x] < pos_[y]) std::swap(x, y);
  // One reduction per group, and it must stay final: nothing in the group
  // may read it.
  auto reads_reduction_of = [&](int a, int b) {
    int r = units_[b].reduction;
    if (r < 0) return false;
    for (int u : users_[r])
      if (u < processed_ && find(u) == a) return true;
    return false;
  };
  if ((units_[x].reduction >= 0 && units_[y].reduction >= 0) || reads_reduction_of(x, y) ||
      reads_reduction_of(y, x))
    return false;
  int px = pos_[x], py = pos_[y];
  // The units between y and x that depend on y, found in one sweep: the
  // order is topological, so a unit's producers are marked before it.
  ++stamp_;
  auto depends_on_y = [&](int u) {
    for (int m : units_[u].members)
      for (int d : deps_[m]) {
        int r = find(d);
        if (r == y || mark_[r] == stamp_) return true;
      }
    return false;
  };
  bool cycle = false;
  for (int k = py + 1; k < px && !cycle; ++k) {
    int u = order_[k];
    if (!depends_on_y(u)) continue;
    mark_[u] = stamp_;
    for (int m : units_[u].members)
      for (int user : users_[m])
        if (user < processed_ && find(user) == x) cycle = true;  // x reads it
  }
  if (cycle) return false;

  // Reorder y..x as: the units in between that do not depend on y, the
  // merged unit, then those that do.
  std::vector<int> before, after;
  for (int k = py + 1; k < px; ++k) (mark_[order_[k]] == stamp_ ? after : before).push_back(order_[k]);
  Unit& ux = units_[x];
  Unit& uy = units_[y];
  // Members are kept unordered here (emit_group sorts them); appending the
  // smaller list keeps merging cheap.
  if (uy.members.size() < ux.members.size()) std::swap(uy.members, ux.members);
  uy.members.insert(uy.members.end(), ux.members.begin(), ux.members.end());
  uy.reduction = std::max(uy.reduction, ux.reduction);
  ux = {};
  parent_[x] = y;
  std::vector<int> tail = std::move(before);
  tail.push_back(y);
  tail.insert(tail.end(), after.begin(), after.end());
  tail.insert(tail.end(), order_.begin() + px + 1, order_.end());
  order_.resize(size_t(py));
  for (int u : tail) {
    pos_[u] = int(order_.size());
    order_.push_back(u);
  }
  return true;
}

// Places node i as a unit of its own, then merges it with the groups of its
// producers where it fits: an elementwise node with groups of its shape
// (unless it reads their reduction), a sum/max/min/mean with the group of
// its input if that has no reduction yet.
void Fuser::add_node(int i) {
  const ir::Node& n = nodes_[i];
  parent_[i] = i;
  units_[i].members = {i};
  pos_[i] = int(order_.size());
  order_.push_back(i);
  processed_ = i + 1;
  if (is_member_candidate(n)) {
    units_[i].group = true;
    units_[i].shape = g_.type(n.outputs[0]).shape;
    for (int p : deps_[i]) {
      int x = find(i), y = find(p);
      const Unit& uy = units_[y];
      if (x == y || !uy.group || !(uy.shape == units_[x].shape)) continue;
      try_merge(x, y);
    }
  } else if (is_reduction_candidate(n)) {
    int p = g_.values()[n.inputs[0]].node;
    if (p < 0) return;
    int y = find(p);
    if (!units_[y].group || units_[y].reduction >= 0) return;
    units_[i].reduction = i;
    if (!try_merge(i, y)) units_[i].reduction = -1;
  }
}

// Appends the fused node of the group rooted at `root`.
void Fuser::emit_group(Rewriter& rw, int root) {
  const Unit& group = units_[root];
  // Members in node order, which is valid for the body, but the reduction
  // last: no member reads it, directly or through other nodes.
  std::vector<int> order;
  for (int m : group.members)
    if (m != group.reduction) order.push_back(m);
  std::sort(order.begin(), order.end());
  if (group.reduction >= 0) order.push_back(group.reduction);
  auto inside = [&](ValueId v) {
    int p = g_.values()[v].node;
    return p >= 0 && fused_root_[p] == root;
  };
  auto constant = [&](ValueId v) {
    int p = g_.values()[v].node;
    return p >= 0 && is_constant(nodes_[p]);
  };

  ir::Graph body;
  std::unordered_map<ValueId, ValueId> local;  // old value -> body value
  std::vector<ValueId> external;               // the fused node's inputs
  for (int i : order)
    for (ValueId v : nodes_[i].inputs)
      if (!inside(v) && !constant(v) && !local.count(v)) {
        local[v] = body.add_input(g_.type(v));
        external.push_back(v);
      }
  for (int i : order) {
    const ir::Node& n = nodes_[i];
    for (ValueId v : n.inputs) {
      if (local.count(v)) continue;  // an input, an earlier member or a copied constant
      // A constant, copied at the iteration shape: the node broadcast it to that anyway.
      const ir::Node& c = nodes_[g_.values()[v].node];
      ir::Attrs attrs = c.attrs;
      attrs.set("shape", group.shape.vec());
      ir::TypeInfo t{g_.type(v).dtype, group.shape};
      local[v] = body.add_node_typed(*c.op, {}, attrs, {&t, 1}).outputs[0];
    }
    std::vector<ValueId> inputs;
    for (ValueId v : n.inputs) inputs.push_back(local.at(v));
    const ir::TypeInfo& t = g_.type(n.outputs[0]);
    local[n.outputs[0]] = body.add_node_typed(*n.op, std::move(inputs), n.attrs, {&t, 1}).outputs[0];
  }

  // Outputs: member values read by a node outside the group or returned.
  std::vector<ValueId> outs, body_outs;
  std::vector<ir::TypeInfo> types;
  for (int i : order) {
    ValueId v = nodes_[i].outputs[0];
    if (!used_outside_[v]) continue;
    outs.push_back(v);
    body_outs.push_back(local.at(v));
    types.push_back(g_.type(v));
  }
  if (outs.empty()) return;  // dead group
  body.set_outputs(std::move(body_outs));
  ir::Attrs attrs{{"body", ir::to_text(body)},
                  {"kind", std::string(group.reduction >= 0 ? "reduction" : "elementwise")}};
  const ir::Node& f = rw.graph().add_node_typed(fused_op(), rw.map(external), attrs, types);
  for (size_t k = 0; k < outs.size(); ++k) rw.alias(outs[k], f.outputs[k]);
}

ir::Graph Fuser::run() {
  for (size_t i = 0; i < nodes_.size(); ++i) add_node(int(i));

  size_t n = nodes_.size();
  for (size_t i = 0; i < n; ++i) {
    int r = find(int(i));
    if (units_[r].members.size() >= 2) fused_root_[i] = r;
  }
  // Values leaving their unit become fused outputs; constants read only by
  // fused groups are not emitted (each group has its own copy).
  std::vector<bool> returned(g_.values().size(), false);
  for (ValueId v : g_.outputs()) returned[v] = true;
  used_outside_ = returned;
  std::vector<int> fused_readers(n, 0), other_readers(n, 0);
  for (size_t i = 0; i < n; ++i)
    for (ValueId v : nodes_[i].inputs) {
      int p = g_.values()[v].node;
      if (p < 0) continue;
      if (find(p) != find(int(i))) used_outside_[v] = true;
      ++(fused_root_[i] >= 0 ? fused_readers : other_readers)[p];
    }
  auto absorbed = [&](int i) {
    return is_constant(nodes_[i]) && !returned[nodes_[i].outputs[0]] && fused_readers[i] > 0 &&
           other_readers[i] == 0;
  };

  Rewriter rw(g_);
  for (int u : order_) {
    if (units_[u].members.size() >= 2) emit_group(rw, u);
    else if (!absorbed(u)) rw.copy(nodes_[u]);
  }
  return rw.finish();
}

// Whether reader `r` of value `v` fuses with v's producer: an elementwise
// node of v's shape, or a reduction of v.
bool fuses_with(const ir::Graph& g, const ir::Node& r, ValueId v) {
  if (is_member_candidate(r)) return g.type(r.outputs[0]).shape == g.type(v).shape;
  return is_reduction_candidate(r);
}

// Gives every fusable reader of a widening cast, but the first, a copy of
// the cast just before it (see fuse.h).
ir::Graph recompute_widening_casts(const ir::Graph& g) {
  const auto& nodes = g.nodes();
  std::vector<bool> returned(g.values().size(), false);
  for (ValueId v : g.outputs()) returned[v] = true;
  std::vector<std::vector<int>> readers(g.values().size());
  for (size_t i = 0; i < nodes.size(); ++i)
    for (ValueId v : nodes[i].inputs)
      if (readers[v].empty() || readers[v].back() != int(i)) readers[v].push_back(int(i));
  std::vector<bool> recomputed(g.values().size(), false);
  bool any = false;
  for (const ir::Node& n : nodes) {
    if (!is_op(&n, "cast")) continue;
    ValueId y = n.outputs[0];
    if (itemsize(g.type(y).dtype) <= itemsize(g.type(n.inputs[0]).dtype) || returned[y] ||
        readers[y].size() < 2)
      continue;
    bool fusable = std::all_of(readers[y].begin(), readers[y].end(),
                               [&](int r) { return fuses_with(g, nodes[r], y); });
    recomputed[y] = fusable;
    any = any || fusable;
  }
  if (!any) return g;

  Rewriter rw(g);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const ir::Node& n = nodes[i];
    // Each later reader reads its own copy (mapped to v while it is
    // copied), the rest the first cast.
    std::vector<std::pair<ValueId, ValueId>> restore;  // (cast result, the first cast's value)
    for (ValueId v : n.inputs) {
      if (!recomputed[v] || readers[v].front() == int(i) ||
          std::any_of(restore.begin(), restore.end(), [&](auto& r) { return r.first == v; }))
        continue;
      restore.push_back({v, rw[v]});
      rw.copy(nodes[size_t(g.values()[v].node)]);
    }
    rw.copy(n);
    for (auto [v, first] : restore) rw.alias(v, first);
  }
  return rw.finish();
}

}  // namespace

ir::Graph fuse(const ir::Graph& g) { return Fuser(recompute_widening_casts(g)).run(); }

}  // namespace kiln::compiler
