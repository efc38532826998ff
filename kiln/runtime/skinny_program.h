// A traced graph run as skinny collectives (spmd.h): split at its
// collectives into segments (the maximal runs of nodes between collectives,
// and each collective alone), each compiled as its own program through the
// program cache and run in order. Values crossing segments are held between
// runs and freed after their last reader.
//
// Donations: a donated graph input is donated to the segment producing its
// output when that segment is the input's last reader; otherwise (a later
// segment still reads it) the output gets a fresh buffer, which changes
// memory, never results. In the training step the update (the last
// segment, after the gradient collectives) reads the parameters and
// optimizer state last, so they are still updated in place.
#pragma once
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/runtime/program_cache.h"

namespace kiln {

// The node ranges [begin, end) of g, in order, that run as programs.
std::vector<std::pair<size_t, size_t>> split_at_collectives(const ir::Graph& g);

class SkinnyProgram {
 public:
  // `options.donations` are pairs of g's (input, output) indices.
  SkinnyProgram(const ir::Graph& g, Device device, const ProgramOptions& options);

  std::vector<Tensor> run(std::span<const Tensor> inputs) const;
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
