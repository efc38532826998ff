#include "kiln/ir/graph.h"

#include <algorithm>

#include "kiln/base/error.h"

namespace kiln::ir {

ValueId Graph::add_input(const TypeInfo& type) {
  ValueId id = static_cast<ValueId>(values_.size());
  values_.push_back({type, -1, static_cast<int32_t>(inputs_.size())});
  inputs_.push_back(id);
  return id;
}

const Node& Graph::add_node(const OpDef& op, std::vector<ValueId> inputs, const Attrs& attrs) {
  Attrs full = op.complete_attrs(attrs);
  std::vector<TypeInfo> in_types;
  for (ValueId v : inputs) in_types.push_back(type(v));
  std::vector<TypeInfo> out_types = op.infer_types(in_types, full);
  return add_node_typed(op, std::move(inputs), std::move(full), out_types);
}

const Node& Graph::add_node_typed(const OpDef& op, std::vector<ValueId> inputs, Attrs attrs,
                                  std::span<const TypeInfo> out_types) {
  for (ValueId v : inputs)
    KILN_CHECK(v >= 0 && v < static_cast<ValueId>(values_.size()), "op '", op.name,
               "': input %", v, " is not defined in this graph");
  Node n{&op, std::move(inputs), {}, std::move(attrs)};
  int32_t node_index = static_cast<int32_t>(nodes_.size());
  for (size_t i = 0; i < out_types.size(); ++i) {
    n.outputs.push_back(static_cast<ValueId>(values_.size()));
    values_.push_back({out_types[i], node_index, static_cast<int32_t>(i)});
  }
  nodes_.push_back(std::move(n));
  return nodes_.back();
}

void Graph::tag_last_node(std::string_view region) {
  KILN_CHECK(!nodes_.empty(), "tag_last_node: the graph has no nodes");
  auto it = std::find(regions_.begin(), regions_.end(), region);
  if (it == regions_.end()) it = regions_.insert(regions_.end(), std::string(region));
  nodes_.back().region = int32_t(it - regions_.begin());
}

void Graph::set_outputs(std::vector<ValueId> outputs) {
  for (ValueId v : outputs)
    KILN_CHECK(v >= 0 && v < static_cast<ValueId>(values_.size()), "graph output %", v,
               " is not defined in this graph");
  outputs_ = std::move(outputs);
}

void verify(const Graph& g) {
  std::vector<bool> defined(g.values().size(), false);
  for (ValueId v : g.inputs()) defined.at(v) = true;
  for (size_t ni = 0; ni < g.nodes().size(); ++ni) {
    const Node& n = g.nodes()[ni];
    auto where = [&] { return cat("node ", ni, " (", node_to_text(g, n), ")"); };
    std::vector<TypeInfo> in_types;
    for (ValueId v : n.inputs) {
      KILN_CHECK(v >= 0 && static_cast<size_t>(v) < defined.size() && defined[v], where(),
                 ": uses %", v, " before it is defined");
      in_types.push_back(g.type(v));
    }
    Attrs full = n.op->complete_attrs(n.attrs);
    KILN_CHECK(full == n.attrs, where(), ": attributes do not match the schema of '",
               n.op->name, "' (missing defaults)");
    std::vector<TypeInfo> expect = n.op->infer_types(in_types, n.attrs);
    KILN_CHECK(expect.size() == n.outputs.size(), where(), ": has ", n.outputs.size(),
               " outputs, the op defines ", expect.size());
    for (size_t i = 0; i < expect.size(); ++i) {
      ValueId o = n.outputs[i];
      KILN_CHECK(!defined.at(o), where(), ": redefines %", o, " (not SSA)");
      KILN_CHECK(g.type(o) == expect[i], where(), ": output %", o, " is recorded as ",
                 to_string(g.type(o)), " but the shape rule gives ", to_string(expect[i]));
      defined[o] = true;
    }
  }
  for (ValueId v : g.outputs())
    KILN_CHECK(v >= 0 && static_cast<size_t>(v) < defined.size() && defined[v], "graph output %",
               v, " is never defined");
}

}  // namespace kiln::ir
