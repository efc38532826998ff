#include "kiln/compiler/cse.h"

#include <unordered_map>

#include "kiln/base/error.h"
#include "kiln/compiler/rewriter.h"

namespace kiln::compiler {
namespace {

// What makes two nodes interchangeable: op, (new) inputs, attributes and
// output types, as text. Floats print with 17 digits, so equal text is equal value.
std::string node_key(const ir::Graph& g, const ir::Node& n, const std::vector<ir::ValueId>& inputs) {
  std::string key = n.op->name + "(";
  for (ir::ValueId v : inputs) key += cat("%", v, ",");
  key += "){";
  for (const auto& [k, v] : n.attrs.items()) key += k + "=" + ir::to_string(v) + ",";
  key += "}";
  for (ir::ValueId v : n.outputs) key += ir::to_string(g.type(v));
  return key;
}

}  // namespace

ir::Graph cse(const ir::Graph& g) {
  Rewriter rw(g);
  // key -> the new outputs of the first node with that key
  std::unordered_map<std::string, std::vector<ir::ValueId>> seen;
  for (const ir::Node& n : g.nodes()) {
    if (n.op->side_effects) {
      rw.copy(n);
      continue;
    }
    std::string key = node_key(g, n, rw.map(n.inputs));
    auto it = seen.find(key);
    if (it != seen.end()) {
      for (size_t i = 0; i < n.outputs.size(); ++i) rw.alias(n.outputs[i], it->second[i]);
      continue;
    }
    rw.copy(n);
    std::vector<ir::ValueId> outs;
    for (ir::ValueId v : n.outputs) outs.push_back(rw[v]);
    seen.emplace(std::move(key), std::move(outs));
  }
  return rw.finish();
}

}  // namespace kiln::compiler
