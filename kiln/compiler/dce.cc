#include "kiln/compiler/dce.h"

#include <algorithm>

#include "kiln/compiler/rewriter.h"

namespace kiln::compiler {

ir::Graph dce(const ir::Graph& g) {
  const auto& nodes = g.nodes();
  std::vector<bool> needed(g.values().size(), false);
  for (ir::ValueId v : g.outputs()) needed[v] = true;
  // Walking backwards, a node is kept when something kept reads one of its
  // outputs; its own inputs then become needed.
  std::vector<bool> keep(nodes.size(), false);
  for (size_t i = nodes.size(); i-- > 0;) {
    const ir::Node& n = nodes[i];
    keep[i] = n.op->side_effects ||
              std::any_of(n.outputs.begin(), n.outputs.end(), [&](ir::ValueId v) { return needed[v]; });
    if (keep[i])
      for (ir::ValueId v : n.inputs) needed[v] = true;
  }
  Rewriter rw(g);
  for (size_t i = 0; i < nodes.size(); ++i)
    if (keep[i]) rw.copy(nodes[i]);
  return rw.finish();
}

}  // namespace kiln::compiler
