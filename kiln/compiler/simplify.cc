#include "kiln/compiler/simplify.h"

#include <functional>
#include <map>
#include <optional>

#include "kiln/base/error.h"
#include "kiln/compiler/dce.h"
#include "kiln/compiler/rewriter.h"

namespace kiln::compiler {
namespace {

using ir::ValueId;

// A node being rewritten: its (new) inputs, its type, and the graph that
// rewrites append to. Rules look at producers in the new graph, so chains
// collapse in one sweep.
struct Site {
  ir::Graph& g;
  const ir::Node& n;
  std::vector<ValueId> in;
  const ir::TypeInfo& type;

  const ir::TypeInfo& in_type(size_t i) const { return g.type(in[i]); }
  const ir::Node* in_producer(size_t i) const { return producer(g, in[i]); }
  ValueId emit(const char* op, std::vector<ValueId> inputs, const ir::Attrs& attrs) {
    return g.add_node(ir::get_op(op), std::move(inputs), attrs).outputs[0];
  }
};

// The replacement of a node's single output, or nullopt to keep the node.
using Rule = std::function<std::optional<ValueId>(Site&)>;

std::optional<ValueId> if_identity(Site& s) {
  if (s.in_type(0) == s.type) return s.in[0];
  return std::nullopt;
}

// The value of a constant: a `full` node, possibly behind view ops (which
// move elements around but do not change them).
std::optional<double> constant_value(const ir::Graph& g, ValueId v) {
  const ir::Node* n = producer(g, v);
  while (n && n->op->fusion == ir::FusionClass::view && n->inputs.size() == 1)
    n = producer(g, n->inputs[0]);
  if (is_op(n, "full")) return n->attrs.f("value");
  return std::nullopt;
}

// x op c -> x when c is the constant `unit` and the result keeps x's type
// (so the constant neither broadcasts x nor changes its dtype).
std::optional<ValueId> drop_unit(Site& s, size_t x, double unit) {
  size_t c = 1 - x;
  if (s.in_type(x) == s.type && constant_value(s.g, s.in[c]) == unit) return s.in[x];
  return std::nullopt;
}

std::vector<int64_t> normalized_dims(const ir::IntList& dims) {
  std::vector<int64_t> out;
  for (int64_t d : dims) out.push_back(d < 0 ? d + int64_t(dims.size()) : d);
  return out;
}

bool is_identity(const std::vector<int64_t>& p) {
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != int64_t(i)) return false;
  return true;
}

// True when every value of `from` converts to `via` and back unchanged.
bool round_trips(DType from, DType via) {
  if (from == via || from == DType::b8) return true;
  switch (from) {
    case DType::bf16:
    case DType::f16: return via == DType::f32 || via == DType::f64;
    case DType::f32: return via == DType::f64;
    case DType::i32: return via == DType::i64 || via == DType::f64;
    default: return false;
  }
}

std::optional<ValueId> simplify_permute(Site& s) {
  std::vector<int64_t> p = normalized_dims(s.n.attrs.ints("dims"));
  if (is_identity(p)) return s.in[0];
  const ir::Node* inner = s.in_producer(0);
  if (!is_op(inner, "permute")) return std::nullopt;
  // out[i] = mid[p[i]] = x[q[p[i]]]
  std::vector<int64_t> q = normalized_dims(inner->attrs.ints("dims")), composed;
  for (int64_t d : p) composed.push_back(q[d]);
  if (is_identity(composed)) return inner->inputs[0];
  return s.emit("permute", {inner->inputs[0]}, {{"dims", composed}});
}

std::optional<ValueId> simplify_reshape(Site& s) {
  if (auto same = if_identity(s)) return same;
  const ir::Node* inner = s.in_producer(0);
  if (!is_op(inner, "reshape") && !is_op(inner, "squeeze") && !is_op(inner, "unsqueeze"))
    return std::nullopt;
  ValueId x = inner->inputs[0];
  if (s.g.type(x) == s.type) return x;
  return s.emit("reshape", {x}, {{"shape", s.type.shape.vec()}});
}

std::optional<ValueId> simplify_cast(Site& s) {
  if (auto same = if_identity(s)) return same;
  const ir::Node* inner = s.in_producer(0);
  if (!is_op(inner, "cast")) return std::nullopt;
  ValueId x = inner->inputs[0];
  DType from = s.g.type(x).dtype;
  if (from == s.type.dtype && round_trips(from, s.in_type(0).dtype)) return x;
  return std::nullopt;
}

std::optional<ValueId> simplify_neg(Site& s) {
  const ir::Node* inner = s.in_producer(0);
  if (is_op(inner, "neg")) return inner->inputs[0];
  return std::nullopt;
}

// The rules, by op name: algebraic identities are facts about particular ops.
const std::map<std::string, Rule, std::less<>>& rules() {
  static const std::map<std::string, Rule, std::less<>> table = {
      {"copy", [](Site& s) { return std::optional(s.in[0]); }},
      {"reshape", simplify_reshape},
      {"expand", if_identity},
      // A slice whose output has the input's shape covers the axis with step 1
      // (or the axis has at most one element): the identity.
      {"slice", if_identity},
      {"permute", simplify_permute},
      {"cast", simplify_cast},
      {"neg", simplify_neg},
      {"mul", [](Site& s) {
         if (auto r = drop_unit(s, 0, 1.0)) return r;
         return drop_unit(s, 1, 1.0);
       }},
      {"add", [](Site& s) {
         if (auto r = drop_unit(s, 0, 0.0)) return r;
         return drop_unit(s, 1, 0.0);
       }},
      {"sub", [](Site& s) { return drop_unit(s, 0, 0.0); }},
      {"div", [](Site& s) { return drop_unit(s, 0, 1.0); }},
  };
  return table;
}

// One pass over the nodes; sets `changed` when a rule fired.
ir::Graph sweep(const ir::Graph& g, bool& changed) {
  Rewriter rw(g);
  for (const ir::Node& n : g.nodes()) {
    auto rule = rules().find(n.op->name);
    if (rule != rules().end() && n.outputs.size() == 1 && !n.op->side_effects) {
      Site site{rw.graph(), n, rw.map(n.inputs), g.type(n.outputs[0])};
      if (std::optional<ValueId> v = rule->second(site)) {
        KILN_CHECK(rw.graph().type(*v) == site.type, "simplify: rewriting '", n.op->name,
                   "' changed its type from ", ir::to_string(site.type), " to ",
                   ir::to_string(rw.graph().type(*v)), " (a bug in a rule)");
        rw.alias(n.outputs[0], *v);
        changed = true;
        continue;
      }
    }
    rw.copy(n);
  }
  return rw.finish();
}

}  // namespace

ir::Graph simplify(const ir::Graph& g) {
  // Each sweep sees the previous one's results; rewrites only shrink chains,
  // so this settles in a few rounds. The cap guards against a bad rule.
  constexpr int kMaxRounds = 16;
  ir::Graph cur = dce(g);
  for (int round = 0; round < kMaxRounds; ++round) {
    bool changed = false;
    cur = dce(sweep(cur, changed));
    if (!changed) break;
  }
  return cur;
}

}  // namespace kiln::compiler
