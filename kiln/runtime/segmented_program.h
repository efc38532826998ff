// A traced graph run as several programs: split into segments (ranges of
// nodes), each compiled as its own program through the program cache and
// run in order. Values crossing segments are held between runs and freed
// after their last reader. Two splits make the segments, alone or together:
//   skinny collectives (spmd.h): the maximal runs of nodes between
//     collectives, and each collective alone;
//   graph split (compile.graph_split): the model's forward and backward
//     apart, and with layers_per_group > 0 one forward and one backward
//     segment per group of that many layers (from the nodes' regions,
//     kiln/ir/region.h); what lies outside any layer (the embedding, the
//     loss, the update) runs as segments of its own. Middle groups have
//     the same program, so they share one compiled program.
//
// Donations: a donated graph input is donated to the segment producing its
// output when that segment is the input's last reader; otherwise (a later
// segment still reads it) the output gets a fresh buffer, which changes
// memory, never results. In the training step the update (the last
// segment, after the gradient collectives) reads the parameters and
// optimizer state last, so they are still updated in place.
#pragma once
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/runtime/program_cache.h"

namespace kiln {

using NodeRanges = std::vector<std::pair<size_t, size_t>>;  // [begin, end) of g, in order

NodeRanges split_at_collectives(const ir::Graph& g);
// layers_per_group 0: every layer's forward in one segment, every layer's
// backward in another.
NodeRanges split_at_layer_groups(const ir::Graph& g, int64_t layers_per_group);
// The ranges cut wherever `a` or `b` cuts (both cover the same nodes).
NodeRanges cut_both(const NodeRanges& a, const NodeRanges& b);
// The segments compile(fn) runs `g` as (compile.h): at its collectives
// unless `spmd_safe`, and with `graph_split` at its layer groups too;
// nullopt: one program.
std::optional<NodeRanges> program_segments(const ir::Graph& g, std::optional<int64_t> graph_split,
                                           bool spmd_safe);

class SegmentedProgram {
 public:
  // `options.donations` are pairs of g's (input, output) indices.
  SegmentedProgram(const ir::Graph& g, const NodeRanges& segments, Device device,
                   const ProgramOptions& options);

  // Whether every segment's program is ready or in a cache tier (program_cache.h).
  static bool cached(const ir::Graph& g, const NodeRanges& segments, Device device,
                     const ProgramOptions& options);
  // What the segments' recordings keep under replay (replay_buffer_bytes),
  // each distinct program once; runs the compiler passes, builds nothing.
  static PoolBytes replay_buffer_bytes(const ir::Graph& g, const NodeRanges& segments,
                                       Device device, const ProgramOptions& options);
  // The most bytes the values passed between segments hold in the device's
  // pool while one runs (its inputs and outputs among them; not g's inputs,
  // nor what goes into a donated buffer or the offload pool), each a buffer
  // of `buffer_bytes(size)`.
  static int64_t held_between_bytes(const ir::Graph& g, const NodeRanges& segments,
                                    const ProgramOptions& options,
                                    int64_t (*buffer_bytes)(int64_t bytes));
  // The most bytes a run of g as these segments takes beside g's inputs,
  // each segment a program run in turn (a deferred run's regions): the
  // values passed between segments, as held_between_bytes counts them (and
  // the offloaded ones in the offload pool), with the running segment's
  // arenas, each one buffer, and its largest kernel scratch. Each of g's
  // `released_inputs` (the caller gives them up) counts as freed (negative
  // bytes) once the last segment reading it has run. `kept_apart[s]`:
  // segment s's arena and scratch are a recording's, counted apart
  // (replay_buffer_bytes). Runs the compiler passes, builds nothing.
  static PoolBytes run_peak_bytes(const ir::Graph& g, const NodeRanges& segments, Device device,
                                  const ProgramOptions& options,
                                  int64_t (*buffer_bytes)(int64_t bytes),
                                  std::span<const int> released_inputs,
                                  const std::vector<bool>& kept_apart);

  // `replay`: each program's run is a replayed one (executable.h).
  std::vector<Tensor> run(std::span<const Tensor> inputs, bool replay = false) const;
  // The compiled programs, in the order they run.
  std::vector<const Executable*> programs() const;

 private:
  struct Segment {
    std::shared_ptr<const Executable> exe;
    std::vector<ir::ValueId> inputs, outputs;  // values of the whole graph
    std::vector<ir::ValueId> last_read;        // inputs no later segment (or result) reads
  };
  std::vector<Segment> segments_;
  std::vector<ir::ValueId> inputs_, outputs_;
  size_t num_values_ = 0;
};

}  // namespace kiln
