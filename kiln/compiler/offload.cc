#include "kiln/compiler/offload.h"

#include <algorithm>
#include <map>
#include <vector>

#include "kiln/ir/region.h"

namespace kiln::compiler {
namespace {

using ir::ValueId;

// Where one value moves out and back in, as node positions of the input graph.
struct Move {
  ValueId value;
  size_t offload_after;   // the offload follows this node
  size_t reload_before;   // the reload precedes this node
  int32_t offload_region, reload_region;
};

std::vector<Move> plan(const ir::Graph& g) {
  const auto& nodes = g.nodes();
  const size_t n = nodes.size();
  auto backward = [&](size_t i) {
    return nodes[i].region >= 0 && ir::is_backward_region(g.region_name(nodes[i].region));
  };
  // A region run: the maximal stretch of consecutive nodes of one region.
  std::vector<size_t> run_start(n), run_end(n);
  for (size_t i = 0; i < n; ++i)
    run_start[i] = i > 0 && nodes[i].region >= 0 && nodes[i].region == nodes[i - 1].region
                       ? run_start[i - 1] : i;
  for (size_t i = n; i-- > 0;)
    run_end[i] = i + 1 < n && nodes[i].region >= 0 && nodes[i].region == nodes[i + 1].region
                     ? run_end[i + 1] : i;

  std::vector<std::vector<size_t>> readers(g.values().size());
  for (size_t i = 0; i < n; ++i)
    for (ValueId v : nodes[i].inputs)
      if (readers[size_t(v)].empty() || readers[size_t(v)].back() != i) readers[size_t(v)].push_back(i);
  std::vector<bool> returned(g.values().size(), false);
  for (ValueId v : g.outputs()) returned[size_t(v)] = true;

  std::vector<Move> moves;
  for (size_t d = 0; d < n; ++d) {
    if (nodes[d].region < 0 || backward(d)) continue;
    for (ValueId v : nodes[d].outputs) {
      const std::vector<size_t>& r = readers[size_t(v)];
      auto first_bwd = std::find_if(r.begin(), r.end(), [&](size_t i) { return backward(i); });
      if (first_bwd == r.end() || returned[size_t(v)]) continue;
      const size_t last_fwd = first_bwd == r.begin() ? d : *std::prev(first_bwd);
      const size_t out = run_end[last_fwd];
      size_t in = run_start[*first_bwd];
      // One block early: the start of the backward run just before.
      if (in > 0 && backward(in - 1) && run_start[in - 1] > out) in = run_start[in - 1];
      if (in <= out + 1) continue;  // nothing runs in between
      moves.push_back({v, out, in, nodes[out].region, nodes[in].region});
    }
  }
  return moves;
}

}  // namespace

ir::Graph offload_activations(const ir::Graph& g) {
  std::vector<Move> moves = plan(g);
  std::map<size_t, std::vector<const Move*>> offload_after, reload_before;
  for (const Move& m : moves) {
    offload_after[m.offload_after].push_back(&m);
    reload_before[m.reload_before].push_back(&m);
  }
  const ir::OpDef& offload = ir::get_op("offload");
  const ir::OpDef& reload = ir::get_op("reload");
  const auto& nodes = g.nodes();
  ir::Graph out;
  std::vector<ValueId> map(g.values().size(), -1);
  std::map<ValueId, ValueId> on_host;  // original value -> its offloaded copy
  for (ValueId v : g.inputs()) map[size_t(v)] = out.add_input(g.type(v));
  auto tag = [&](int32_t region) {
    if (region >= 0) out.tag_last_node(g.region_name(region));
  };
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (auto it = reload_before.find(i); it != reload_before.end())
      for (const Move* m : it->second) {
        const ir::TypeInfo type[] = {g.type(m->value)};
        map[size_t(m->value)] = out.add_node_typed(reload, {on_host.at(m->value)}, {}, type).outputs[0];
        tag(m->reload_region);
      }
    const ir::Node& n = nodes[i];
    std::vector<ValueId> ins;
    for (ValueId v : n.inputs) ins.push_back(map[size_t(v)]);
    std::vector<ir::TypeInfo> types;
    for (ValueId v : n.outputs) types.push_back(g.type(v));
    const ir::Node& c = out.add_node_typed(*n.op, std::move(ins), n.attrs, types);
    tag(n.region);
    for (size_t k = 0; k < n.outputs.size(); ++k) map[size_t(n.outputs[k])] = c.outputs[k];
    if (auto it = offload_after.find(i); it != offload_after.end())
      for (const Move* m : it->second) {
        const ir::TypeInfo type[] = {g.type(m->value)};
        on_host[m->value] = out.add_node_typed(offload, {map[size_t(m->value)]}, {}, type).outputs[0];
        tag(m->offload_region);
      }
  }
  std::vector<ValueId> outs;
  for (ValueId v : g.outputs()) outs.push_back(map[size_t(v)]);
  out.set_outputs(std::move(outs));
  return out;
}

int64_t offloaded_activation_bytes(const ir::Graph& g) {
  int64_t bytes = 0;
  for (const ir::Node& n : g.nodes())
    if (n.op->offloaded_output)
      for (ValueId v : n.outputs) bytes += g.type(v).shape.numel() * int64_t(itemsize(g.type(v).dtype));
  return bytes;
}

}  // namespace kiln::compiler
