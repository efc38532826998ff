#include "kiln/compiler/rewriter.h"

#include "kiln/base/error.h"

namespace kiln::compiler {

Rewriter::Rewriter(const ir::Graph& src) : src_(src), map_(src.values().size(), -1) {
  for (ir::ValueId v : src.inputs()) map_[v] = out_.add_input(src.type(v));
}

ir::ValueId Rewriter::operator[](ir::ValueId v) const {
  ir::ValueId to = map_.at(v);
  KILN_CHECK(to >= 0, "compiler: value %", v, " is used before the pass mapped it");
  return to;
}

std::vector<ir::ValueId> Rewriter::map(const std::vector<ir::ValueId>& vs) const {
  std::vector<ir::ValueId> out;
  out.reserve(vs.size());
  for (ir::ValueId v : vs) out.push_back((*this)[v]);
  return out;
}

void Rewriter::alias(ir::ValueId v, ir::ValueId to) { map_.at(v) = to; }

void Rewriter::copy(const ir::Node& n) {
  std::vector<ir::TypeInfo> types;
  for (ir::ValueId v : n.outputs) types.push_back(src_.type(v));
  const ir::Node& c = out_.add_node_typed(*n.op, map(n.inputs), n.attrs, types);
  for (size_t i = 0; i < n.outputs.size(); ++i) map_[n.outputs[i]] = c.outputs[i];
  if (n.region >= 0) out_.tag_last_node(src_.region_name(n.region));
}

ir::Graph Rewriter::finish() {
  out_.set_outputs(map(src_.outputs()));
  return std::move(out_);
}

const ir::Node* producer(const ir::Graph& g, ir::ValueId v) {
  int32_t n = g.values().at(v).node;
  return n < 0 ? nullptr : &g.nodes()[n];
}

bool is_op(const ir::Node* n, std::string_view name) { return n && n->op->name == name; }

}  // namespace kiln::compiler
