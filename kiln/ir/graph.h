// The IR: a functional SSA graph. Values have a dtype and a static shape;
// nodes apply a registered op to values and define new ones. Nodes are kept
// in a valid execution order (every input defined before use).
#pragma once
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/ir/op.h"

namespace kiln::ir {

using ValueId = int32_t;

struct Value {
  TypeInfo type;
  int32_t node = -1;  // producing node, -1 for a graph input
  int32_t index = 0;  // which output of that node (or which graph input)
};

struct Node {
  const OpDef* op = nullptr;
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  Attrs attrs;
  // The model region (e.g. one transformer block) the node was traced in:
  // an index into the graph's region names, -1 for none. Regions say where a
  // node came from; they never change what it computes (fingerprints and the
  // text form leave them out).
  int32_t region = -1;
};

class Graph {
 public:
  ValueId add_input(const TypeInfo& type);
  // Completes the attributes, infers output types and appends the node.
  const Node& add_node(const OpDef& op, std::vector<ValueId> inputs, const Attrs& attrs);
  // Appends a node whose output types are already known (the parser, passes).
  const Node& add_node_typed(const OpDef& op, std::vector<ValueId> inputs, Attrs attrs,
                             std::span<const TypeInfo> out_types);
  void set_outputs(std::vector<ValueId> outputs);
  // Puts the most recently added node in region `name` (interned).
  void tag_last_node(std::string_view region);
  const std::string& region_name(int32_t region) const { return regions_.at(size_t(region)); }

  const std::vector<Value>& values() const { return values_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<ValueId>& inputs() const { return inputs_; }
  const std::vector<ValueId>& outputs() const { return outputs_; }
  const TypeInfo& type(ValueId v) const { return values_.at(v).type; }

 private:
  std::vector<Value> values_;
  std::vector<Node> nodes_;
  std::vector<ValueId> inputs_;
  std::vector<ValueId> outputs_;
  std::vector<std::string> regions_;
};

// Text form: one node a line, types shown; parse_graph reads it back.
//   graph(%0: f32[2,3], %1: f32[3]) {
//     %2: f32[2,3] = add(%0, %1)
//     %3: f32[2] = sum(%2) {axes=[1], keepdim=false}
//     return %3
//   }
std::string to_text(const Graph& g);
std::string node_to_text(const Graph& g, const Node& n);
Graph parse_graph(std::string_view text);  // errors name the line and column

// Checks SSA form, op arity, attribute schemas and that every recorded type
// equals what the op's shape rule infers. Throws kiln::Error naming the node.
void verify(const Graph& g);

}  // namespace kiln::ir
