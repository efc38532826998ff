#include "kiln/runtime/segmented_program.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "kiln/base/error.h"
#include "kiln/ir/region.h"
#include "kiln/runtime/executable.h"
#include "kiln/runtime/executable_impl.h"
#include "kiln/runtime/graph_runner.h"
#include "kiln/runtime/spmd.h"

namespace kiln {

NodeRanges split_at_collectives(const ir::Graph& g) {
  NodeRanges ranges;
  const auto& nodes = g.nodes();
  for (size_t i = 0; i < nodes.size();) {
    size_t end = i + 1;
    if (!is_collective(*nodes[i].op))
      while (end < nodes.size() && !is_collective(*nodes[end].op)) ++end;
    ranges.push_back({i, end});
    i = end;
  }
  return ranges;
}

NodeRanges split_at_layer_groups(const ir::Graph& g, int64_t layers_per_group) {
  KILN_CHECK(layers_per_group >= 0, "graph split: ", layers_per_group,
             " layers per group; need 0 (all layers in one group) or more");
  // A node's segment key: -1 outside any layer, else 2 x group (+1 backward).
  auto key = [&](const ir::Node& n) -> int64_t {
    if (n.region < 0) return -1;
    const std::string& name = g.region_name(n.region);
    const int64_t layer = ir::region_index(name);
    const int64_t group = layers_per_group > 0 && layer >= 0 ? layer / layers_per_group : 0;
    return 2 * group + (ir::is_backward_region(name) ? 1 : 0);
  };
  NodeRanges ranges;
  const auto& nodes = g.nodes();
  for (size_t i = 0; i < nodes.size();) {
    size_t end = i + 1;
    while (end < nodes.size() && key(nodes[end]) == key(nodes[i])) ++end;
    ranges.push_back({i, end});
    i = end;
  }
  return ranges;
}

NodeRanges cut_both(const NodeRanges& a, const NodeRanges& b) {
  std::set<size_t> cuts;
  for (const NodeRanges* r : {&a, &b})
    for (auto [begin, end] : *r) cuts.insert(begin), cuts.insert(end);
  NodeRanges out;
  for (auto it = cuts.begin(); it != cuts.end() && std::next(it) != cuts.end(); ++it)
    out.push_back({*it, *std::next(it)});
  return out;
}

namespace {

// The segments' graphs and options, before anything compiles.
struct SegmentPlan {
  std::vector<RegionSegment> segs;
  std::vector<ProgramOptions> options;
  std::vector<int> last_reader;  // per value: the last segment reading it (results: one past all)
};

SegmentPlan plan_segments(const ir::Graph& g, const NodeRanges& segments, const ProgramOptions& options) {
  SegmentPlan p;
  for (auto [begin, end] : segments) p.segs.push_back(extract_segment(g, begin, end));
  p.last_reader.assign(g.values().size(), -1);
  for (size_t s = 0; s < p.segs.size(); ++s)
    for (ir::ValueId v : p.segs[s].inputs) p.last_reader[size_t(v)] = int(s);
  for (ir::ValueId v : g.outputs()) p.last_reader[size_t(v)] = int(p.segs.size());

  p.options.assign(p.segs.size(), ProgramOptions{options.passes, {}, options.name});
  for (auto [in, out] : options.donations) {
    ir::ValueId vin = g.inputs()[size_t(in)], vout = g.outputs()[size_t(out)];
    int32_t node = g.values()[size_t(vout)].node;
    if (node < 0) continue;  // a result that is an input: nothing to write
    auto seg = std::find_if(p.segs.begin(), p.segs.end(), [&](const RegionSegment& s) {
      return size_t(node) >= s.begin && size_t(node) < s.end;
    });
    size_t s = size_t(seg - p.segs.begin());
    if (p.last_reader[size_t(vin)] != int(s)) continue;
    auto at = [](const std::vector<ir::ValueId>& list, ir::ValueId v) {
      return int(std::find(list.begin(), list.end(), v) - list.begin());
    };
    p.options[s].donations.push_back({at(seg->inputs, vin), at(seg->outputs, vout)});
  }
  return p;
}

}  // namespace

SegmentedProgram::SegmentedProgram(const ir::Graph& g, const NodeRanges& segments, Device device,
                                   const ProgramOptions& options)
    : inputs_(g.inputs()), outputs_(g.outputs()), num_values_(g.values().size()) {
  SegmentPlan p = plan_segments(g, segments, options);
  for (size_t s = 0; s < p.segs.size(); ++s) {
    Segment seg;
    seg.exe = get_executable(p.segs[s].graph, device, p.options[s]);
    seg.inputs = std::move(p.segs[s].inputs);
    seg.outputs = std::move(p.segs[s].outputs);
    for (ir::ValueId v : seg.inputs)
      if (p.last_reader[size_t(v)] == int(s)) seg.last_read.push_back(v);
    segments_.push_back(std::move(seg));
  }
}

bool SegmentedProgram::cached(const ir::Graph& g, const NodeRanges& segments, Device device,
                              const ProgramOptions& options) {
  SegmentPlan p = plan_segments(g, segments, options);
  for (size_t s = 0; s < p.segs.size(); ++s)
    if (!executable_cached(p.segs[s].graph, device, p.options[s])) return false;
  return true;
}

PoolBytes SegmentedProgram::replay_buffer_bytes(const ir::Graph& g, const NodeRanges& segments,
                                               Device device, const ProgramOptions& options) {
  SegmentPlan p = plan_segments(g, segments, options);
  ReplayBufferTally tally;
  for (size_t s = 0; s < p.segs.size(); ++s) tally.add(p.segs[s].graph, device, p.options[s]);
  return tally.total();
}

namespace {

// Per segment: the bytes the values passed between segments hold while it runs.
std::vector<PoolBytes> held_while_each_runs(const ir::Graph& g, const SegmentPlan& p,
                                            int64_t (*buffer_bytes)(int64_t bytes)) {
  std::vector<PoolBytes> held(p.segs.size());
  for (size_t s = 0; s < p.segs.size(); ++s) {
    std::vector<bool> donated(p.segs[s].outputs.size(), false);
    for (auto [in, out] : p.options[s].donations) donated[size_t(out)] = true;
    for (size_t k = 0; k < p.segs[s].outputs.size(); ++k) {
      if (donated[k]) continue;
      const ir::ValueId v = p.segs[s].outputs[k];
      const ir::TypeInfo& t = g.type(v);
      const int64_t bytes = buffer_bytes(t.shape.numel() * int64_t(itemsize(t.dtype)));
      int64_t PoolBytes::*pool = offloaded_value(g, v) ? &PoolBytes::offload : &PoolBytes::device;
      for (size_t live = s; live <= size_t(p.last_reader[size_t(v)]) && live < held.size(); ++live)
        held[live].*pool += bytes;
    }
  }
  return held;
}

}  // namespace

int64_t SegmentedProgram::held_between_bytes(const ir::Graph& g, const NodeRanges& segments,
                                             const ProgramOptions& options,
                                             int64_t (*buffer_bytes)(int64_t bytes)) {
  int64_t peak = 0;
  for (const PoolBytes& h : held_while_each_runs(g, plan_segments(g, segments, options), buffer_bytes))
    peak = std::max(peak, h.device);
  return peak;
}

PoolBytes SegmentedProgram::run_peak_bytes(const ir::Graph& g, const NodeRanges& segments,
                                           Device device, const ProgramOptions& options,
                                           int64_t (*buffer_bytes)(int64_t bytes),
                                           std::span<const int> released_inputs,
                                           const std::vector<bool>& kept_apart) {
  const SegmentPlan p = plan_segments(g, segments, options);
  const std::vector<PoolBytes> held = held_while_each_runs(g, p, buffer_bytes);
  std::map<std::string, ProgramRunBytes> programs;  // by fingerprint: a stack's layers share one
  auto arena = [&](int64_t bytes) { return bytes > 0 ? buffer_bytes(bytes) : 0; };
  PoolBytes peak;
  for (size_t s = 0; s < p.segs.size(); ++s) {
    PoolBytes now = held[s];
    for (int i : released_inputs) {
      const ir::ValueId v = g.inputs()[size_t(i)];
      const ir::TypeInfo& t = g.type(v);
      if (p.last_reader[size_t(v)] < int(s))
        now.device -= buffer_bytes(t.shape.numel() * int64_t(itemsize(t.dtype)));
    }
    if (!kept_apart[s]) {
      const ir::Graph& segment = p.segs[s].graph;
      const std::string key = ir::to_string(program_fingerprint(segment, device, p.options[s]));
      auto it = programs.find(key);
      if (it == programs.end())
        it = programs
                 .emplace(key, program_run_bytes(segment, device, p.options[s].passes,
                                                 p.options[s].donations))
                 .first;
      now.device += arena(it->second.arena) + it->second.scratch;
      now.offload += arena(it->second.offload_arena);
    }
    peak.device = std::max(peak.device, now.device);
    peak.offload = std::max(peak.offload, now.offload);
  }
  return peak;
}

std::optional<NodeRanges> program_segments(const ir::Graph& g, std::optional<int64_t> graph_split,
                                           bool spmd_safe) {
  std::optional<NodeRanges> ranges;
  if (!spmd_safe && has_collective(g)) ranges = split_at_collectives(g);
  if (graph_split)
    ranges = cut_both(ranges.value_or(NodeRanges{{0, g.nodes().size()}}),
                      split_at_layer_groups(g, *graph_split));
  return ranges;
}

std::vector<Tensor> SegmentedProgram::run(std::span<const Tensor> inputs, bool replay) const {
  KILN_CHECK(inputs.size() == inputs_.size(), "compiled program takes ", inputs_.size(),
             " inputs, got ", inputs.size());
  std::vector<Tensor> env(num_values_);
  for (size_t i = 0; i < inputs.size(); ++i) env[size_t(inputs_[i])] = inputs[i];
  std::vector<Tensor> args;
  for (const Segment& seg : segments_) {
    args.clear();
    for (ir::ValueId v : seg.inputs) args.push_back(env[size_t(v)]);
    // A donated input is read last here: no handle of ours outlives the run.
    for (ir::ValueId v : seg.last_read) env[size_t(v)] = Tensor();
    std::vector<Tensor> out = seg.exe->run(args, replay);
    for (size_t k = 0; k < out.size(); ++k) env[size_t(seg.outputs[k])] = std::move(out[k]);
  }
  args.clear();
  std::vector<Tensor> result;
  for (ir::ValueId v : outputs_) result.push_back(env[size_t(v)]);
  return result;
}

std::vector<const Executable*> SegmentedProgram::programs() const {
  std::vector<const Executable*> p;
  for (const Segment& s : segments_) p.push_back(s.exe.get());
  return p;
}

}  // namespace kiln
