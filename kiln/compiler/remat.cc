#include "kiln/compiler/remat.h"

#include <algorithm>
#include <map>
#include <set>

#include "kiln/base/error.h"
#include "kiln/compiler/offload.h"
#include "kiln/ir/region.h"

namespace kiln::compiler {
namespace {

using ir::ValueId;

// One forward region's recomputation, planned before the graph is rebuilt.
struct Recompute {
  int32_t backward_region = -1;
  std::vector<size_t> nodes;     // forward nodes to clone, in graph order
  std::vector<ValueId> barriers; // values the clones read from outside `nodes`
};

// Forward region id -> its backward region id, for regions that have both.
std::map<int32_t, int32_t> region_pairs(const ir::Graph& g) {
  std::map<std::string, int32_t> ids;
  for (const ir::Node& n : g.nodes())
    if (n.region >= 0) ids.emplace(g.region_name(n.region), n.region);
  std::map<int32_t, int32_t> pairs;
  for (const auto& [name, id] : ids) {
    if (ir::is_backward_region(name)) continue;
    auto it = ids.find(ir::backward_region(name));
    if (it != ids.end()) pairs.emplace(id, it->second);
  }
  return pairs;
}

std::vector<Recompute> plan(const ir::Graph& g, RematPolicy policy) {
  const auto& nodes = g.nodes();
  std::vector<Recompute> out;
  for (auto [fwd, bwd] : region_pairs(g)) {
    auto in_fwd = [&](ValueId v) {
      int32_t n = g.values()[size_t(v)].node;
      return n >= 0 && nodes[size_t(n)].region == fwd;
    };
    auto kept = [&](ValueId v) {
      return policy == RematPolicy::selective && saved_by_selective(*nodes[size_t(g.values()[size_t(v)].node)].op);
    };
    // The region's values its backward reads, then everything they need
    // back to the region's inputs (or to values the policy keeps).
    std::set<size_t> clone;
    std::vector<ValueId> work;
    for (const ir::Node& n : nodes)
      if (n.region == bwd)
        for (ValueId v : n.inputs)
          if (in_fwd(v) && !kept(v)) work.push_back(v);
    while (!work.empty()) {
      ValueId v = work.back();
      work.pop_back();
      size_t producer = size_t(g.values()[size_t(v)].node);
      if (!clone.insert(producer).second) continue;
      for (ValueId u : nodes[producer].inputs)
        if (in_fwd(u) && !kept(u)) work.push_back(u);
    }
    if (clone.empty()) continue;
    Recompute r;
    r.backward_region = bwd;
    r.nodes.assign(clone.begin(), clone.end());
    std::set<ValueId> seen;
    for (size_t i : r.nodes)
      for (ValueId u : nodes[i].inputs) {
        int32_t p = g.values()[size_t(u)].node;
        if ((p < 0 || !clone.count(size_t(p))) && seen.insert(u).second) r.barriers.push_back(u);
      }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace

RematPolicy parse_remat_policy(std::string_view name) {
  if (name == "none") return RematPolicy::none;
  if (name == "full") return RematPolicy::full;
  if (name == "selective") return RematPolicy::selective;
  if (name == "offload") return RematPolicy::offload;
  fail("activation checkpoint mode '", name, "' is not one of none, full, selective, offload");
}

const char* remat_policy_name(RematPolicy p) {
  switch (p) {
    case RematPolicy::none: return "none";
    case RematPolicy::full: return "full";
    case RematPolicy::selective: return "selective";
    case RematPolicy::offload: return "offload";
  }
  return "?";
}

std::optional<int64_t> kept_activation_bytes(const ir::Graph& g) {
  const auto& nodes = g.nodes();
  auto backward = [&](int32_t region) {
    return region >= 0 && ir::is_backward_region(g.region_name(region));
  };
  bool any_backward = false;
  std::set<ValueId> kept;
  for (const ir::Node& n : nodes) {
    if (!backward(n.region)) continue;
    any_backward = true;
    for (ValueId v : n.inputs) {
      int32_t p = g.values()[size_t(v)].node;
      if (p < 0) continue;
      const ir::Node& made = nodes[size_t(p)];
      // An offloaded copy is in host memory, not kept on the device.
      const size_t k = size_t(std::find(made.outputs.begin(), made.outputs.end(), v) - made.outputs.begin());
      if (made.region >= 0 && !backward(made.region) && !ir::output_offloaded(*made.op, made.attrs, k))
        kept.insert(v);
    }
  }
  if (!any_backward) return std::nullopt;
  int64_t bytes = 0;
  for (ValueId v : kept) bytes += g.type(v).shape.numel() * int64_t(itemsize(g.type(v).dtype));
  return bytes;
}

bool saved_by_selective(const ir::OpDef& op) {
  static const std::set<std::string> heavy = {
      "matmul", "scaled_dot_product_attention", "flash_attention", "grouped_matmul"};
  return heavy.count(op.name) > 0;
}

ir::Graph rematerialize(const ir::Graph& g, RematPolicy policy) {
  if (policy == RematPolicy::none) return g;
  if (policy == RematPolicy::offload) return offload_activations(g);
  std::vector<Recompute> recomputes = plan(g, policy);
  std::map<int32_t, const Recompute*> by_backward;
  for (const Recompute& r : recomputes) by_backward.emplace(r.backward_region, &r);

  const auto& nodes = g.nodes();
  ir::Graph out;
  std::vector<ValueId> map(g.values().size(), -1);
  for (ValueId v : g.inputs()) map[size_t(v)] = out.add_input(g.type(v));
  // Per backward region: the recomputed value standing for each original.
  std::map<int32_t, std::map<ValueId, ValueId>> recomputed;
  const ir::OpDef& barrier = ir::get_op("optimization_barrier");
  auto copy_node = [&](const ir::Node& n, const std::map<ValueId, ValueId>* local,
                       std::map<ValueId, ValueId>* define, int32_t region) {
    std::vector<ValueId> ins;
    for (ValueId v : n.inputs) {
      auto it = local ? local->find(v) : std::map<ValueId, ValueId>::const_iterator();
      ins.push_back(local && it != local->end() ? it->second : map[size_t(v)]);
    }
    std::vector<ir::TypeInfo> types;
    for (ValueId v : n.outputs) types.push_back(g.type(v));
    const ir::Node& c = out.add_node_typed(*n.op, std::move(ins), n.attrs, types);
    if (region >= 0) out.tag_last_node(g.region_name(region));
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      if (define) (*define)[n.outputs[k]] = c.outputs[k];
      else map[size_t(n.outputs[k])] = c.outputs[k];
    }
  };
  for (const ir::Node& n : nodes) {
    auto it = n.region >= 0 ? by_backward.find(n.region) : by_backward.end();
    if (it != by_backward.end() && !recomputed.count(n.region)) {
      // The backward region starts: recompute its forward values first.
      const Recompute& r = *it->second;
      std::map<ValueId, ValueId>& local = recomputed[n.region];
      for (ValueId v : r.barriers) {
        const ir::Node& b = out.add_node_typed(barrier, {map[size_t(v)]}, {}, {{g.type(v)}});
        out.tag_last_node(g.region_name(n.region));
        local[v] = b.outputs[0];
      }
      for (size_t i : r.nodes) copy_node(nodes[i], &local, &local, n.region);
    }
    auto rec = n.region >= 0 ? recomputed.find(n.region) : recomputed.end();
    copy_node(n, rec != recomputed.end() ? &rec->second : nullptr, nullptr, n.region);
  }
  std::vector<ValueId> outs;
  for (ValueId v : g.outputs()) outs.push_back(map[size_t(v)]);
  out.set_outputs(std::move(outs));
  return out;
}

}  // namespace kiln::compiler
