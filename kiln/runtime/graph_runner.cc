#include "kiln/runtime/graph_runner.h"

#include <algorithm>
#include <climits>
#include <memory>
#include <optional>

#include "kiln/base/error.h"
#include "kiln/compiler/pipeline.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/context.h"
#include "kiln/runtime/dispatch.h"
#include "kiln/runtime/executable.h"
#include "kiln/runtime/recording.h"
#include "kiln/runtime/region.h"
#include "kiln/runtime/spmd.h"

namespace kiln {

RegionSegment extract_segment(const ir::Graph& g, size_t begin, size_t end) {
  RegionSegment s;
  s.begin = begin, s.end = end;
  const auto& nodes = g.nodes();
  std::vector<ir::ValueId> local(g.values().size(), -1);
  auto inside = [&](ir::ValueId v) {
    int32_t n = g.values()[size_t(v)].node;
    return n >= int32_t(begin) && n < int32_t(end);
  };
  for (size_t i = begin; i < end; ++i) {
    const ir::Node& n = nodes[i];
    std::vector<ir::ValueId> ins;
    for (ir::ValueId v : n.inputs) {
      if (local[size_t(v)] < 0) {
        KILN_CHECK(!inside(v), "extract_segment: value %", v, " used before its definition");
        local[size_t(v)] = s.graph.add_input(g.type(v));
        s.inputs.push_back(v);
      }
      ins.push_back(local[size_t(v)]);
    }
    std::vector<ir::TypeInfo> types;
    for (ir::ValueId v : n.outputs) types.push_back(g.type(v));
    const ir::Node& copy = s.graph.add_node_typed(*n.op, std::move(ins), n.attrs, types);
    for (size_t k = 0; k < n.outputs.size(); ++k) local[size_t(n.outputs[k])] = copy.outputs[k];
  }
  // Read after the segment: by a later node or as a result of g.
  std::vector<bool> escapes(g.values().size(), false);
  for (size_t i = end; i < nodes.size(); ++i)
    for (ir::ValueId v : nodes[i].inputs) escapes[size_t(v)] = true;
  for (ir::ValueId v : g.outputs()) escapes[size_t(v)] = true;
  std::vector<ir::ValueId> outs;
  for (size_t i = begin; i < end; ++i)
    for (ir::ValueId v : nodes[i].outputs)
      if (escapes[size_t(v)]) {
        s.outputs.push_back(v);
        outs.push_back(local[size_t(v)]);
      }
  s.graph.set_outputs(std::move(outs));
  return s;
}

std::vector<std::pair<size_t, size_t>> region_programs(const ir::Graph& g, bool spmd_safe) {
  const auto& nodes = g.nodes();
  auto compiled = [&](size_t i) {
    return nodes[i].region >= 0 && (spmd_safe || !is_collective(*nodes[i].op));
  };
  std::vector<std::pair<size_t, size_t>> ranges;
  for (size_t i = 0; i < nodes.size();) {
    if (!compiled(i)) {
      ++i;
      continue;
    }
    size_t end = i + 1;
    while (end < nodes.size() && nodes[end].region == nodes[i].region && compiled(end)) ++end;
    ranges.push_back({i, end});
    i = end;
  }
  return ranges;
}

void ReplayBufferTally::add(const ir::Graph& g, Device device, const ProgramOptions& options) {
  if (!seen_.insert(ir::to_string(program_fingerprint(g, device, options))).second) return;
  const ir::Graph program = compiler::optimize(prepare_for_device(g, device), options.passes);
  const PoolBytes r = replay_buffer_bytes(program, options.donations, device);
  total_.device += r.device;
  total_.offload += r.offload;
}

PoolBytes region_replay_buffer_bytes(const ir::Graph& g, Device device,
                                     const ProgramOptions& options, bool spmd_safe) {
  ReplayBufferTally tally;
  for (auto [begin, end] : region_programs(g, spmd_safe))
    tally.add(extract_segment(g, begin, end).graph, device, options);
  return tally.total();
}

namespace {

// A run abandoned by an exception: on each device its values are on, what
// its nodes started and no wait finished (an offload's transfer) ends after
// the work enqueued so far and before their buffers go. After a failure on
// the queue itself this task is dropped: the queue ended that work then.
void finish_started_work(const std::vector<Tensor>& env) {
  std::vector<Device> devices;
  auto keep = std::make_shared<std::vector<std::shared_ptr<Storage>>>();
  for (const Tensor& t : env) {
    if (!t.defined() || !t.impl().storage) continue;
    keep->push_back(t.impl().storage);
    if (std::find(devices.begin(), devices.end(), t.device()) == devices.end())
      devices.push_back(t.device());
  }
  for (Device d : devices)
    backend(d).queue(d.index).enqueue([keep] { drain_in_flight(); },
                                      "finishing the transfers of an abandoned graph run");
}

// run_graph, and with `regions` run_graph_compiling_regions.
std::vector<Tensor> run(const ir::Graph& g, std::vector<Tensor> inputs, const std::string& label,
                        const ProgramOptions* regions) {
  KILN_CHECK(inputs.size() == g.inputs().size(), label, ": graph takes ", g.inputs().size(),
             " inputs, got ", inputs.size());
  const auto& nodes = g.nodes();
  // Last node reading each value, so intermediates are freed as soon as possible.
  std::vector<int32_t> last_use(g.values().size(), -1);
  for (size_t i = 0; i < nodes.size(); ++i)
    for (ir::ValueId v : nodes[i].inputs) last_use[size_t(v)] = int32_t(i);
  for (ir::ValueId v : g.outputs()) last_use[size_t(v)] = INT32_MAX;

  // Nodes without inputs (constants, arange) make their values where the inputs are.
  const Device device = inputs.empty() ? kCPU : inputs[0].device();
  std::vector<Tensor> env(g.values().size());
  for (size_t i = 0; i < inputs.size(); ++i)
    if (last_use[size_t(g.inputs()[i])] >= 0) env[size_t(g.inputs()[i])] = std::move(inputs[i]);
  inputs.clear();  // unread ones go now
  auto release_inputs_of = [&](size_t first, size_t last) {
    for (size_t i = first; i < last; ++i)
      for (ir::ValueId v : nodes[i].inputs)
        if (last_use[size_t(v)] < int32_t(last)) env[size_t(v)] = Tensor();
  };

  std::vector<std::pair<size_t, size_t>> programs;
  if (regions) programs = region_programs(g, spmd_safe());
  auto next_program = programs.begin();
  std::vector<Tensor> args;
  try {
    for (size_t i = 0; i < nodes.size();) {
      const ir::Node& n = nodes[i];
      if (next_program == programs.end() || next_program->first != i) {
        args.clear();
        for (ir::ValueId v : n.inputs) args.push_back(env[size_t(v)]);
        OpPositionGuard where(cat("node ", i, " of ", label, ": ", ir::node_to_text(g, n)));
        std::optional<RegionGuard> region;  // an enclosing trace keeps the node's region
        if (n.region >= 0) region.emplace(g.region_name(n.region));
        std::vector<Tensor> out = apply(*n.op, args, n.attrs, device);
        for (size_t k = 0; k < out.size(); ++k) env[size_t(n.outputs[k])] = std::move(out[k]);
        release_inputs_of(i, i + 1);
        ++i;
        continue;
      }
      size_t end = (next_program++)->second;
      RegionSegment seg = extract_segment(g, i, end);
      args.clear();
      for (ir::ValueId v : seg.inputs) args.push_back(env[size_t(v)]);
      std::vector<Tensor> out;
      {
        OpPositionGuard where(cat("nodes ", i, "-", end - 1, " of ", label, " (region ",
                                  g.region_name(n.region), ")"));
        out = get_executable(seg.graph, args.empty() ? device : args[0].device(), *regions)->run(args, regions->replay);
      }
      for (size_t k = 0; k < out.size(); ++k) env[size_t(seg.outputs[k])] = std::move(out[k]);
      release_inputs_of(i, end);
      i = end;
    }
  } catch (...) {
    finish_started_work(env);
    throw;
  }
  std::vector<Tensor> result;
  for (ir::ValueId v : g.outputs()) result.push_back(env[size_t(v)]);
  return result;
}

}  // namespace

std::vector<Tensor> run_graph(const ir::Graph& g, std::vector<Tensor> inputs,
                              const std::string& label) {
  return run(g, std::move(inputs), label, nullptr);
}

std::vector<Tensor> run_graph_compiling_regions(const ir::Graph& g, std::vector<Tensor> inputs,
                                                const std::string& label,
                                                const ProgramOptions& options) {
  return run(g, std::move(inputs), label, &options);
}

}  // namespace kiln
