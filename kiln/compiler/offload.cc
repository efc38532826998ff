#include "kiln/compiler/offload.h"

#include <algorithm>
#include <functional>
#include <map>
#include <vector>

#include "kiln/ir/region.h"

namespace kiln::compiler {
namespace {

using ir::ValueId;

// Where one value moves out and back in, as node positions of the input
// graph. Each move is started and waited for later in the same region run,
// so that the copy runs beside the compute in between and every per-block
// program holds its moves whole.
struct Move {
  ValueId value;
  size_t offload_after;    // the offload starts after this node (the value's last forward use)
  size_t offloaded_after;  // and is waited for after this one, its run's end
  size_t reload_before;    // the reload starts before this node, opening its run
  size_t reloaded_before;  // and is waited for before this one: the first reader or the next run
  int32_t offload_region, reload_region;
};

bool in_backward(const ir::Graph& g, const ir::Node& n) {
  return n.region >= 0 && ir::is_backward_region(g.region_name(n.region));
}

// A backward that differentiates an op through its composite (attention)
// first recomputes the op's forward from the op's inputs. Where those
// inputs stay on the device, the compiler's CSE merges that recomputation
// with the lowered forward; reloaded, they would defeat it. So such
// recomputations (backward nodes that read such an op's inputs, constants
// and other recomputations, and nothing that depends on a cotangent) move
// into the forward, right after the last of their inputs, in that node's
// region: their results are then saved activations like any other, and CSE
// merges them with the lowered op again.
ir::Graph hoist_recomputations(const ir::Graph& g) {
  const auto& nodes = g.nodes();
  auto made_by = [&](ValueId v) { return g.values()[size_t(v)].node; };
  // The forward: nodes of forward regions and everything the loss (the
  // first result) is computed from.
  std::vector<bool> forward(nodes.size(), false);
  std::vector<ValueId> work;
  if (!g.outputs().empty()) work.push_back(g.outputs()[0]);
  while (!work.empty()) {
    const int32_t p = made_by(work.back());
    work.pop_back();
    if (p < 0 || forward[size_t(p)]) continue;
    forward[size_t(p)] = true;
    work.insert(work.end(), nodes[size_t(p)].inputs.begin(), nodes[size_t(p)].inputs.end());
  }
  for (size_t i = 0; i < nodes.size(); ++i)
    forward[i] = forward[i] || (nodes[i].region >= 0 && !in_backward(g, nodes[i]));
  // Every other node is hoisted (a recomputation), a constant of a backward
  // region (it reads neither the forward nor the backward: masks, scalars,
  // aranges) or the backward proper (it depends on a cotangent).
  // A recomputation starts from the inputs of forward ops that autograd
  // differentiates through their composite (no vjp rule of their own).
  std::vector<bool> composite_input(g.values().size(), false);
  for (size_t i = 0; i < nodes.size(); ++i)
    if (forward[i] && !nodes[i].op->vjp && nodes[i].op->composite)
      for (ValueId v : nodes[i].inputs) composite_input[size_t(v)] = true;
  enum Kind : uint8_t { fwd, hoist, constant, bwd };
  std::vector<Kind> kind(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    bool reads_forward = false, reads_backward = false, recomputes = true;
    for (ValueId v : nodes[i].inputs) {
      const int32_t p = made_by(v);
      if (p < 0) continue;
      reads_forward = reads_forward || kind[size_t(p)] == fwd || kind[size_t(p)] == hoist;
      reads_backward = reads_backward || kind[size_t(p)] == bwd;
      recomputes = recomputes && (kind[size_t(p)] != fwd || composite_input[size_t(v)]);
    }
    const bool fixed = nodes[i].op->side_effects;
    // Outside the backward regions and the forward, autograd's own nodes
    // (the loss's cotangent, zero gradients) start the backward proper.
    kind[i] = forward[i]                                                ? fwd
              : reads_backward || fixed || !in_backward(g, nodes[i])    ? bwd
              : reads_forward && recomputes                             ? hoist
                                                                        : constant;
  }
  // A hoisted node follows the forward node that made its last input.
  std::vector<std::vector<size_t>> after(nodes.size());
  std::vector<int32_t> anchor(nodes.size(), -1);
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (kind[i] == fwd) anchor[i] = int32_t(i);
    if (kind[i] != hoist) continue;
    for (ValueId v : nodes[i].inputs)
      if (const int32_t p = made_by(v); p >= 0 && kind[size_t(p)] != constant)
        anchor[i] = std::max(anchor[i], anchor[size_t(p)]);
    after[size_t(anchor[i])].push_back(i);
  }
  ir::Graph out;
  std::vector<ValueId> map(g.values().size(), -1);
  for (ValueId v : g.inputs()) map[size_t(v)] = out.add_input(g.type(v));
  std::vector<bool> emitted(nodes.size(), false);
  // Emits node i (and first the constants it reads that are not out yet).
  std::function<void(size_t, int32_t)> emit = [&](size_t i, int32_t region) {
    const ir::Node& n = nodes[i];
    for (ValueId v : n.inputs)
      if (const int32_t p = made_by(v); p >= 0 && !emitted[size_t(p)]) emit(size_t(p), region);
    std::vector<ValueId> ins;
    for (ValueId v : n.inputs) ins.push_back(map[size_t(v)]);
    std::vector<ir::TypeInfo> types;
    for (ValueId v : n.outputs) types.push_back(g.type(v));
    const ir::Node& c = out.add_node_typed(*n.op, std::move(ins), n.attrs, types);
    if (region >= 0) out.tag_last_node(g.region_name(region));
    for (size_t k = 0; k < n.outputs.size(); ++k) map[size_t(n.outputs[k])] = c.outputs[k];
    emitted[i] = true;
  };
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (emitted[i] || kind[i] == hoist) continue;
    emit(i, nodes[i].region);
    for (size_t h : after[i]) emit(h, nodes[i].region);
  }
  std::vector<ValueId> outs;
  for (ValueId v : g.outputs()) outs.push_back(map[size_t(v)]);
  out.set_outputs(std::move(outs));
  return out;
}

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
      const size_t reloaded = std::min(*first_bwd, run_end[in] + 1);
      moves.push_back({v, last_fwd, out, in, reloaded, nodes[last_fwd].region, nodes[in].region});
    }
  }
  return moves;
}

// A scan over the layers keeps each iteration's carries for its backward
// (its last outputs): they live in the offload pool, which its loop writes
// one layer at a time. A scan that reads stacked inputs from the offload
// pool (the backward's) copies each iteration's slices in one iteration
// ahead. `ins` are the scan's inputs in `out`; it has `outputs` outputs.
void mark_scan_offloads(const ir::Graph& out, const std::vector<ValueId>& ins, size_t outputs,
                        ir::Attrs& attrs) {
  if (attrs.b("saved_carries")) attrs.set("offload_from", int64_t(outputs) - attrs.i("carries"));
  ir::IntList host;
  const int64_t carries = attrs.i("carries"), stacked = attrs.i("stacked");
  for (int64_t k = 0; k < stacked; ++k) {
    const ValueId v = ins[size_t(carries + k)];
    const int32_t p = out.values()[size_t(v)].node;
    if (p < 0) continue;
    const ir::Node& made = out.nodes()[size_t(p)];
    const size_t at = size_t(std::find(made.outputs.begin(), made.outputs.end(), v) - made.outputs.begin());
    if (ir::output_offloaded(*made.op, made.attrs, at)) host.push_back(k);
  }
  if (!host.empty()) attrs.set("offloaded_stacked", host);
}

}  // namespace

ir::Graph offload_activations(const ir::Graph& traced) {
  const ir::Graph g = hoist_recomputations(traced);
  std::vector<Move> moves = plan(g);
  std::map<size_t, std::vector<const Move*>> offload_after, offloaded_after, reload_before,
      reloaded_before;
  for (const Move& m : moves) {
    offload_after[m.offload_after].push_back(&m);
    offloaded_after[m.offloaded_after].push_back(&m);
    reload_before[m.reload_before].push_back(&m);
    reloaded_before[m.reloaded_before].push_back(&m);
  }
  const ir::OpDef& offload = ir::get_op("offload_start");
  const ir::OpDef& reload = ir::get_op("reload_start");
  const ir::OpDef& wait = ir::get_op("transfer_wait");
  const auto& nodes = g.nodes();
  ir::Graph out;
  std::vector<ValueId> map(g.values().size(), -1);
  std::map<ValueId, ValueId> on_host;  // original value -> its offloaded copy
  for (ValueId v : g.inputs()) map[size_t(v)] = out.add_input(g.type(v));
  // Emits `op` over `ins` in `region` of g.
  auto add = [&](const ir::OpDef& op, std::vector<ValueId> ins, ValueId like, ir::Attrs attrs,
                 int32_t region) {
    const ir::TypeInfo type[] = {g.type(like)};
    const ValueId v = out.add_node_typed(op, std::move(ins), std::move(attrs), type).outputs[0];
    if (region >= 0) out.tag_last_node(g.region_name(region));
    return v;
  };
  ir::Attrs offloaded, on_device;
  offloaded.set("offloaded", true);
  on_device.set("offloaded", false);
  auto reload_wait = [&](const Move* m) {
    map[size_t(m->value)] = add(wait, {map[size_t(m->value)], on_host.at(m->value)}, m->value,
                                on_device, m->reload_region);
  };
  auto offload_wait = [&](const Move* m) {
    on_host[m->value] = add(wait, {on_host.at(m->value), map[size_t(m->value)]}, m->value,
                            offloaded, m->offload_region);
  };
  // At one position, the waits of moves started before it come first (they
  // close the run before), then the starts, then the waits of those starts.
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (const Move* m : reloaded_before[i])
      if (m->reload_before < i) reload_wait(m);
    for (const Move* m : reload_before[i])
      map[size_t(m->value)] = add(reload, {on_host.at(m->value)}, m->value, {}, m->reload_region);
    for (const Move* m : reloaded_before[i])
      if (m->reload_before == i) reload_wait(m);
    const ir::Node& n = nodes[i];
    std::vector<ValueId> ins;
    for (ValueId v : n.inputs) ins.push_back(map[size_t(v)]);
    std::vector<ir::TypeInfo> types;
    for (ValueId v : n.outputs) types.push_back(g.type(v));
    ir::Attrs attrs = n.attrs;
    if (n.op->name == "scan") mark_scan_offloads(out, ins, n.outputs.size(), attrs);
    const ir::Node& c = out.add_node_typed(*n.op, std::move(ins), std::move(attrs), types);
    if (n.region >= 0) out.tag_last_node(g.region_name(n.region));
    for (size_t k = 0; k < n.outputs.size(); ++k) map[size_t(n.outputs[k])] = c.outputs[k];
    for (const Move* m : offloaded_after[i])
      if (m->offload_after < i) offload_wait(m);
    for (const Move* m : offload_after[i])
      on_host[m->value] = add(offload, {map[size_t(m->value)]}, m->value, {}, m->offload_region);
    for (const Move* m : offloaded_after[i])
      if (m->offload_after == i) offload_wait(m);
  }
  std::vector<ValueId> outs;
  for (ValueId v : g.outputs()) outs.push_back(map[size_t(v)]);
  out.set_outputs(std::move(outs));
  return out;
}

int64_t offloaded_activation_bytes(const ir::Graph& g) {
  int64_t bytes = 0;
  for (const ir::Node& n : g.nodes())
    for (size_t k = 0; k < n.outputs.size(); ++k)
      if (ir::output_offloaded(*n.op, n.attrs, k) && !n.op->aliases_first_input)
        bytes += g.type(n.outputs[k]).shape.numel() * int64_t(itemsize(g.type(n.outputs[k]).dtype));
  return bytes;
}

}  // namespace kiln::compiler
