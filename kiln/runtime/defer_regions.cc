#include "kiln/runtime/defer_regions.h"

#include <functional>
#include <string>

#include "kiln/runtime/spmd.h"

namespace kiln {
namespace {

constexpr uint64_t kHashBase = 0x100000001b3ull;

// A node's identity for the repeat rule: op, attributes, input types.
uint64_t node_signature(const ir::Graph& g, const ir::Node& n) {
  uint64_t h = std::hash<std::string>{}(n.op->name);
  auto mix = [&](uint64_t v) { h = (h ^ v) * kHashBase + 0x9e3779b97f4a7c15ull; };
  for (const auto& [k, v] : n.attrs.items()) mix(std::hash<std::string>{}(k + ir::to_string(v)));
  for (ir::ValueId v : n.inputs) {
    const ir::TypeInfo& t = g.type(v);
    mix(uint64_t(t.dtype));
    for (int64_t d : t.shape) mix(uint64_t(d));
  }
  return h;
}

}  // namespace

RegionCutter::Cut RegionCutter::note(const ir::Graph& g, const ir::Node& node) {
  const uint64_t sig = node_signature(g, node);
  if (hashes_.empty()) hashes_.push_back(0);
  hashes_.push_back(hashes_.back() * kHashBase + sig);
  const size_t n = hashes_.size() - 1;  // nodes in the region
  while (powers_.size() <= n) powers_.push_back(powers_.empty() ? 1 : powers_.back() * kHashBase);
  auto range = [&](size_t a, size_t b) { return hashes_[b] - hashes_[a] * powers_[b - a]; };

  bool repeat = learned_size_ && n == learned_size_ && hashes_[n] == learned_hash_;
  std::vector<size_t>& earlier = seen_[sig];
  for (size_t k = earlier.size(); k-- > 0 && !repeat && earlier.size() - k <= 4;) {
    const size_t p = n - 1 - earlier[k];
    if (p >= kMinBlockOps && n >= 2 * p && range(n - p, n) == range(n - 2 * p, n - p)) {
      learned_size_ = p;
      learned_hash_ = range(n - p, n);
      repeat = true;
    }
  }
  earlier.push_back(n - 1);
  return repeat ? Cut::repeat : n >= kMaxRegionOps ? Cut::full : Cut::none;
}

void RegionCutter::begin_region() {
  hashes_.clear();
  seen_.clear();
}

NodeRanges deferred_regions(const ir::Graph& g, bool spmd_safe, const NodeRanges& apart) {
  const auto& nodes = g.nodes();
  RegionCutter cutter;
  NodeRanges regions;
  for (int pass = 0; pass < 2; ++pass) {  // the first teaches the cutter the run's block
    regions.clear();
    cutter.begin_region();
    std::vector<bool> materialized(g.values().size(), false);
    for (ir::ValueId v : g.inputs()) materialized[size_t(v)] = true;
    size_t begin = 0;
    auto end_region = [&](size_t end) {
      if (end == begin) return;
      regions.push_back({begin, end});
      for (size_t i = begin; i < end; ++i)
        for (ir::ValueId v : nodes[i].outputs) materialized[size_t(v)] = true;
      begin = end;
      cutter.begin_region();
    };
    auto next_apart = apart.begin();
    for (size_t i = 0; i < nodes.size(); ++i) {
      const ir::Node& n = nodes[i];
      if (next_apart != apart.end() && next_apart->first == i) {
        end_region(i);
        end_region(next_apart->second);
        i = next_apart++->second - 1;
      } else if (n.op->view && n.inputs.size() == 1 && materialized[size_t(n.inputs[0])]) {
        for (ir::ValueId v : n.outputs) materialized[size_t(v)] = true;
      } else if (is_collective(*n.op) && !spmd_safe) {
        end_region(i);
        end_region(i + 1);
      } else if (cutter.note(g, n) != RegionCutter::Cut::none) {
        end_region(i + 1);
      }
    }
    end_region(nodes.size());
  }
  return regions;
}

ir::Graph with_views_passed_as_roots(const ir::Graph& g, NodeRanges& regions) {
  const auto& nodes = g.nodes();
  std::vector<size_t> region_of(nodes.size());
  for (size_t r = 0; r < regions.size(); ++r)
    for (size_t i = regions[r].first; i < regions[r].second; ++i) region_of[i] = r;
  auto is_view = [&](const ir::Node& n) {
    return n.op->view && n.inputs.size() == 1 && n.outputs.size() == 1;
  };
  ir::Graph out;
  std::vector<ir::ValueId> moved(g.values().size(), -1);  // g's value -> out's
  for (ir::ValueId v : g.inputs()) moved[size_t(v)] = out.add_input(g.type(v));
  for (size_t r = 0; r < regions.size(); ++r) {
    const size_t begin = out.nodes().size();
    std::unordered_map<ir::ValueId, ir::ValueId> derived;  // views derived again in region r
    std::function<ir::ValueId(ir::ValueId)> read = [&](ir::ValueId v) {
      const int32_t def = g.values()[size_t(v)].node;
      if (def < 0 || region_of[size_t(def)] == r || !is_view(nodes[size_t(def)])) return moved[size_t(v)];
      if (auto it = derived.find(v); it != derived.end()) return it->second;
      const ir::Node& view = nodes[size_t(def)];
      const ir::ValueId base = read(view.inputs[0]);
      const ir::ValueId copy = out.add_node_typed(*view.op, {base}, view.attrs, {{g.type(v)}}).outputs[0];
      return derived[v] = copy;
    };
    for (size_t i = regions[r].first; i < regions[r].second; ++i) {
      const ir::Node& n = nodes[i];
      std::vector<ir::ValueId> ins;
      for (ir::ValueId v : n.inputs) ins.push_back(read(v));
      std::vector<ir::TypeInfo> types;
      for (ir::ValueId v : n.outputs) types.push_back(g.type(v));
      const ir::Node& copy = out.add_node_typed(*n.op, std::move(ins), n.attrs, types);
      for (size_t k = 0; k < n.outputs.size(); ++k) moved[size_t(n.outputs[k])] = copy.outputs[k];
    }
    regions[r] = {begin, out.nodes().size()};
  }
  std::vector<ir::ValueId> outputs;
  for (ir::ValueId v : g.outputs()) outputs.push_back(moved[size_t(v)]);
  out.set_outputs(std::move(outputs));
  return out;
}

}  // namespace kiln
