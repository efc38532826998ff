// Helpers for the compiler-pass tests: IR text in, IR text out.
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "kiln/ir/graph.h"

namespace kiln::compiler::test {

// Parses IR text and checks it is a valid graph.
inline ir::Graph ir_graph(std::string_view text) {
  ir::Graph g = ir::parse_graph(text);
  ir::verify(g);
  return g;
}

// The canonical text of `text`: dense value numbers, defaults filled in.
inline std::string canon(std::string_view text) { return ir::to_text(ir_graph(text)); }

// Runs `pass` on the graph written in `text`, verifies the result and
// returns its text.
template <class Pass>
std::string run_pass(Pass pass, std::string_view text) {
  ir::Graph out = pass(ir_graph(text));
  ir::verify(out);
  return ir::to_text(out);
}

inline int count_op(const ir::Graph& g, std::string_view op) {
  int n = 0;
  for (const ir::Node& node : g.nodes()) n += node.op->name == op;
  return n;
}

}  // namespace kiln::compiler::test
