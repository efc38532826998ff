// Running a recorded graph: run_graph (declared in recording.h) runs it node
// by node through the current context. Per-block compile,
// run_graph_compiling_regions, runs it like run_graph, except that each
// maximal run of consecutive nodes in one model region (a transformer block's
// forward, or its backward) runs as one compiled program. The programs come
// from the program cache keyed by the segment's fingerprint, and a segment's
// parameters are its inputs, so every layer of a stack shares one compiled
// forward and one compiled backward program. Nodes outside regions run
// through the current context one by one, as run_graph runs them, and so
// do collectives unless the caller is SPMD-safe (spmd.h): a region's
// program then stops before a collective and resumes after it.
#pragma once
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/runtime/program_cache.h"
#include "kiln/runtime/tensor.h"

namespace kiln {

struct RegionSegment {
  size_t begin = 0, end = 0;        // nodes [begin, end) of the graph
  ir::Graph graph;                  // those nodes as a graph of their own
  std::vector<ir::ValueId> inputs;  // graph values feeding graph.inputs(), in order
  std::vector<ir::ValueId> outputs; // graph values produced as graph.outputs(), in order
};

// Nodes [begin, end) of `g` as a self-contained graph: inputs are the values
// defined outside the range that it reads (in order of first use), outputs
// the values it defines that later nodes or g's outputs read (in order of
// definition). Regions are dropped: the segment is one program.
RegionSegment extract_segment(const ir::Graph& g, size_t begin, size_t end);

// The node ranges [begin, end) run_graph_compiling_regions runs as
// programs, in order: maximal runs of consecutive nodes of one region,
// which without `spmd_safe` hold no collective.
std::vector<std::pair<size_t, size_t>> region_programs(const ir::Graph& g, bool spmd_safe);

// Adds up what the recordings of the programs get_executable builds for
// graphs keep under replay (replay_buffer_bytes), each distinct program once,
// as the program cache shares one. The compiler passes run (the cost of a
// compile's first half); nothing is built.
class ReplayBufferTally {
 public:
  void add(const ir::Graph& g, Device device, const ProgramOptions& options);
  const PoolBytes& total() const { return total_; }

 private:
  std::set<std::string> seen_;  // program fingerprints
  PoolBytes total_;
};

// What the programs run_graph_compiling_regions runs for `g` keep under
// `options.replay`, as the layers of a stack share one program; `spmd_safe`
// as region_programs takes it.
PoolBytes region_replay_buffer_bytes(const ir::Graph& g, Device device,
                                     const ProgramOptions& options, bool spmd_safe);

std::vector<Tensor> run_graph_compiling_regions(const ir::Graph& g, std::vector<Tensor> inputs,
                                                const std::string& label,
                                                const ProgramOptions& options);

}  // namespace kiln
