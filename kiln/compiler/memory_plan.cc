#include "kiln/compiler/memory_plan.h"

#include <algorithm>
#include <map>

#include "kiln/base/error.h"
#include "kiln/compiler/fused_op.h"

namespace kiln::compiler {
namespace {

int64_t aligned(int64_t bytes) {
  return (bytes + MemoryPlan::kAlignment - 1) / MemoryPlan::kAlignment * MemoryPlan::kAlignment;
}

// A best-fit allocator over one growing arena; freed neighbours coalesce.
class Arena {
 public:
  int64_t allocate(int64_t size) {
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it)
      if (it->second >= size && (best == free_.end() || it->second < best->second)) best = it;
    if (best == free_.end()) {
      // Grow: extend the free block at the top, if any, else append.
      int64_t at = top_;
      if (!free_.empty() && std::prev(free_.end())->first + std::prev(free_.end())->second == top_) {
        at = std::prev(free_.end())->first;
        free_.erase(std::prev(free_.end()));
      }
      top_ = at + size;
      return at;
    }
    auto [at, have] = *best;
    free_.erase(best);
    if (have > size) free_[at + size] = have - size;
    return at;
  }

  void release(int64_t at, int64_t size) {
    auto next = free_.lower_bound(at);
    if (next != free_.end() && at + size == next->first) {
      size += next->second;
      next = free_.erase(next);
    }
    if (next != free_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == at) {
        prev->second += size;
        return;
      }
    }
    free_[at] = size;
  }

  int64_t size() const { return top_; }

 private:
  std::map<int64_t, int64_t> free_;  // offset -> size
  int64_t top_ = 0;
};

// A wait's result is its input's buffer; a reshape's its input's bytes.
bool shares_first_input(const ir::Node& n) {
  return n.op->aliases_first_input || n.op->reinterprets_first_input;
}

// Reads element i of each same-typed input before writing element i.
bool element_aligned(const ir::Graph& g, const ir::Node& n) {
  if (n.op->fusion == ir::FusionClass::elementwise) return n.outputs.size() == 1;
  if (n.op != &fused_op() || n.attrs.s("kind") != "elementwise") return false;
  // Several outputs: each element of one output is written after every
  // input element of the same position is read (the fused kernels' order),
  // when the outputs all span the node's whole iteration space.
  for (ir::ValueId y : n.outputs)
    if (g.type(y).shape != g.type(n.outputs[0]).shape) return false;
  return true;
}

}  // namespace

int64_t MemoryPlan::offset_of(ir::ValueId v) const {
  KILN_CHECK(in_arena(v), "memory plan: value %", v, " is not in the arena");
  return offsets[v];
}

MemoryPlan plan_memory(const ir::Graph& g, const std::vector<std::pair<int, int>>& donations,
                       const PlanOptions& options) {
  const auto& nodes = g.nodes();
  const int n = int(nodes.size());
  const size_t nv = g.values().size();
  KILN_CHECK(options.node_scratch.empty() || options.node_scratch.size() == nodes.size(),
             "memory plan: node_scratch has ", options.node_scratch.size(), " entries for ", n,
             " nodes");
  MemoryPlan plan;
  plan.offsets.assign(nv, -1);
  plan.offloaded.assign(nv, false);
  plan.bytes.resize(nv);
  for (size_t v = 0; v < nv; ++v) {
    const ir::TypeInfo& t = g.type(ir::ValueId(v));
    plan.bytes[v] = t.shape.numel() * int64_t(itemsize(t.dtype));
  }

  // Liveness: the last node reading each value; returned values live to the end.
  std::vector<int> last_use(nv, -1);
  std::vector<bool> returned(nv, false);
  for (int i = 0; i < n; ++i)
    for (ir::ValueId v : nodes[i].inputs) last_use[v] = i;
  for (ir::ValueId v : g.outputs()) returned[v] = true;

  // Donations.
  std::vector<bool> in_donated_buffer(nv, false), input_taken(g.inputs().size(), false);
  std::vector<ir::ValueId> donor_of(nv, -1);  // per donated output: the input it is written in
  std::vector<bool> output_taken(g.outputs().size(), false);
  for (auto [in, out] : donations) {
    KILN_CHECK(in >= 0 && in < int(g.inputs().size()) && out >= 0 && out < int(g.outputs().size()),
               "memory plan: donation (input ", in, ", output ", out, ") is out of range: the graph has ",
               g.inputs().size(), " inputs and ", g.outputs().size(), " outputs");
    ir::ValueId x = g.inputs()[in], y = g.outputs()[out];
    int def = g.values()[y].node;
    bool first_position = std::find(g.outputs().begin(), g.outputs().end(), y) - g.outputs().begin() == out;
    if (input_taken[in] || output_taken[out] || in_donated_buffer[y] || def < 0 || returned[x] ||
        ir::output_offloaded(*nodes[def].op, nodes[def].attrs,
                             size_t(std::find(nodes[def].outputs.begin(), nodes[def].outputs.end(), y) -
                                    nodes[def].outputs.begin())) ||
        !first_position || g.type(x).dtype != g.type(y).dtype || plan.bytes[x] != plan.bytes[y])
      continue;
    bool dead_before = last_use[x] < def;
    bool in_place = last_use[x] == def && element_aligned(g, nodes[def]) && g.type(x) == g.type(y);
    if (!dead_before && !in_place) continue;
    input_taken[in] = output_taken[out] = true;
    in_donated_buffer[y] = true;
    donor_of[y] = x;
    plan.donated.push_back({in, out});
  }

  // The arena holds every value a node defines, except outputs placed elsewhere.
  auto placed_elsewhere = [&](ir::ValueId v) {
    return in_donated_buffer[v] || (!options.outputs_in_arena && returned[v]);
  };
  // A wait or reshape whose result is placed elsewhere: its input is
  // written there in the first place, when nothing else reads it. Into a
  // donated buffer only when the donor's last read comes before the node
  // that writes the input (a collective's start writes while later nodes
  // run, and those may still read the donor).
  plan.written_in.assign(nv, -1);
  std::vector<int> readers(nv, 0);
  for (int i = 0; i < n; ++i)
    for (ir::ValueId v : nodes[i].inputs) ++readers[v];
  for (int i = 0; i < n; ++i) {
    if (!shares_first_input(nodes[i])) continue;
    ir::ValueId x = nodes[i].inputs[0], y = nodes[i].outputs[0];
    const int def = g.values()[x].node;
    if (def < 0 || returned[x] || readers[x] != 1 || !placed_elsewhere(y) ||
        plan.bytes[x] != plan.bytes[y])
      continue;
    if (in_donated_buffer[y] && last_use[donor_of[y]] >= def) continue;
    plan.written_in[x] = y;
  }
  auto planned = [&](ir::ValueId v) { return !placed_elsewhere(v) && plan.written_in[v] < 0; };
  // A wait (collective_wait, transfer_wait) hands its started buffer on as
  // its result, a reshape its input's bytes: both values share one slot,
  // live from the input's definition to the last read of either.
  std::vector<ir::ValueId> alias_of(nv, -1);
  for (int i = 0; i < n; ++i) {
    if (!shares_first_input(nodes[i])) continue;
    ir::ValueId x = nodes[i].inputs[0], y = nodes[i].outputs[0];
    if (g.values()[x].node < 0 || !planned(x) || !planned(y)) continue;
    ir::ValueId root = alias_of[x] >= 0 ? alias_of[x] : x;
    alias_of[y] = root;
    last_use[root] = std::max(last_use[root], last_use[y]);
    returned[root] = returned[root] || returned[y];
  }
  Arena device, offload;
  auto arena_of = [&](ir::ValueId v) -> Arena& { return plan.offloaded[v] ? offload : device; };
  auto buffer = [&](int64_t bytes) { return options.buffer_bytes ? options.buffer_bytes(bytes) : aligned(bytes); };
  int64_t live = 0, offload_live = 0;  // in buffers of their own
  auto live_of = [&](ir::ValueId v) -> int64_t& { return plan.offloaded[v] ? offload_live : live; };
  std::vector<int64_t> released_at(size_t(n), 0);  // bytes of given-up inputs read last by node i
  for (int in : options.released_inputs) {
    KILN_CHECK(in >= 0 && in < int(g.inputs().size()), "memory plan: released input ", in,
               " is out of range: the graph has ", g.inputs().size(), " inputs");
    const ir::ValueId x = g.inputs()[size_t(in)];
    if (plan.bytes[x] == 0 || (last_use[x] < 0 && !returned[x])) continue;  // never read: gone at once
    live += buffer(plan.bytes[x]);
    if (!returned[x]) released_at[size_t(last_use[x])] += buffer(plan.bytes[x]);
  }
  std::vector<std::vector<ir::ValueId>> dies_at(n);
  for (int i = 0; i < n; ++i) {
    for (size_t k = 0; k < nodes[i].outputs.size(); ++k) {
      const ir::ValueId v = nodes[i].outputs[k];
      if (!planned(v)) continue;
      if (alias_of[v] >= 0) {
        plan.offsets[v] = plan.offsets[alias_of[v]];
        plan.offloaded[v] = plan.offloaded[alias_of[v]];
        continue;
      }
      plan.offloaded[v] = ir::output_offloaded(*nodes[i].op, nodes[i].attrs, k);
      int64_t size = aligned(plan.bytes[v]);
      if (!plan.offloaded[v]) plan.naive_bytes += size;
      plan.offsets[v] = size ? arena_of(v).allocate(size) : 0;
      if (size) live_of(v) += buffer(plan.bytes[v]);
      if (!returned[v] && size) dies_at[std::max(i, last_use[v])].push_back(v);
    }
    // The kernel's scratch lives beside the node's inputs and outputs.
    const int64_t scratch = options.node_scratch.empty() ? 0 : options.node_scratch[size_t(i)];
    if (scratch > 0) device.release(device.allocate(aligned(scratch)), aligned(scratch));
    plan.live_peak_bytes = std::max(plan.live_peak_bytes, live + std::max<int64_t>(scratch, 0));
    plan.offload_live_peak_bytes = std::max(plan.offload_live_peak_bytes, offload_live);
    // After the node ran, its inputs read for the last time (and its unread
    // outputs) are free for later nodes.
    for (ir::ValueId v : dies_at[i]) {
      arena_of(v).release(plan.offsets[v], aligned(plan.bytes[v]));
      live_of(v) -= buffer(plan.bytes[v]);
    }
    live -= released_at[size_t(i)];
  }
  plan.peak_bytes = device.size();
  plan.offload_peak_bytes = offload.size();
  return plan;
}

}  // namespace kiln::compiler
