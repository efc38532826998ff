// Where defer_and_fuse (defer.h) cuts the ops it records into regions.
// RegionCutter is the rule DeferContext applies as ops come: a region ends
// after one repeat of a block (a stack of identical layers flushes at each
// layer's boundary) or at a size cap. deferred_regions applies the same
// rule to a traced graph, so an estimate (the trainer's expected peak)
// sees the programs a deferred run makes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/runtime/segmented_program.h"

namespace kiln {

class RegionCutter {
 public:
  enum class Cut { none, repeat, full };

  // Notes the region's next node (of `g`, which types its inputs); says
  // whether the region ends after it. A repeat: the newest node repeats one
  // p nodes back and the last p nodes equal the p before them (p at least
  // kMinBlockOps); those p are the block, and later regions end as soon as
  // they hold one such block. Full: kMaxRegionOps nodes, bounding host memory.
  Cut note(const ir::Graph& g, const ir::Node& node);
  // A region begins (what was learned, the block, is kept).
  void begin_region();

  static constexpr size_t kMaxRegionOps = 4096;
  static constexpr size_t kMinBlockOps = 16;

 private:
  // hashes_[i]: a rolling hash of the region's first i node signatures, so
  // any two ranges compare in O(1).
  std::vector<uint64_t> hashes_, powers_;
  std::unordered_map<uint64_t, std::vector<size_t>> seen_;  // signature -> node indices
  size_t learned_size_ = 0;  // nodes in the repeating block, once learned
  uint64_t learned_hash_ = 0;
};

// The regions a deferred run of `g`'s nodes, in order, makes: as
// RegionCutter cuts them, in the steady state of a run repeating `g` (the
// cutter has seen `g` once before), a collective alone unless `spmd_safe`
// (spmd.h). `apart` (ranges of g, in order) run as programs of their own
// (per-block compile's blocks): each is a region, and one ends before it.
// A view of a materialized value runs eagerly, outside every region: it is
// placed in the region around it, which it does not lengthen.
NodeRanges deferred_regions(const ir::Graph& g, bool spmd_safe, const NodeRanges& apart = {});

// `g` as a deferred run passes values between its `regions`: a live view
// is not a region's output, its chain's root is (defer.cc), and a later
// region reads the view derived again from the root. Each read of a view
// in a later region than the view's becomes a read of a copy of its view
// chain made there, just before the reader. `regions` become the
// rewritten graph's node ranges; inputs and outputs keep their order.
ir::Graph with_views_passed_as_roots(const ir::Graph& g, NodeRanges& regions);

}  // namespace kiln
