// Building a new graph from an old one. Every pass is Graph -> Graph: it
// walks the old nodes in order and emits nodes into a fresh graph, so values
// come out densely numbered (inputs first, then node outputs in order).
#pragma once
#include <string_view>
#include <vector>

#include "kiln/ir/graph.h"

namespace kiln::compiler {

class Rewriter {
 public:
  // Copies the graph inputs of `src`, in order.
  explicit Rewriter(const ir::Graph& src);

  // The new value standing for old value `v` (it must have been mapped).
  ir::ValueId operator[](ir::ValueId v) const;
  std::vector<ir::ValueId> map(const std::vector<ir::ValueId>& vs) const;
  // Makes old value `v` stand for new value `to` (forwarding, merging).
  void alias(ir::ValueId v, ir::ValueId to);
  // Copies old node `n` with its inputs remapped, in its region; its outputs
  // map to the copy's.
  void copy(const ir::Node& n);

  ir::Graph& graph() { return out_; }
  // Sets the old graph's outputs (remapped) and hands the new graph over.
  ir::Graph finish();

 private:
  const ir::Graph& src_;
  ir::Graph out_;
  std::vector<ir::ValueId> map_;
};

// The node of `g` defining `v`, or nullptr for a graph input.
const ir::Node* producer(const ir::Graph& g, ir::ValueId v);
// True when `n` exists and applies the op named `name`.
bool is_op(const ir::Node* n, std::string_view name);

}  // namespace kiln::compiler
