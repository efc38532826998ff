#include "kiln/compiler/fused_op.h"

#include <mutex>
#include <optional>
#include <unordered_map>

#include "kiln/base/error.h"

namespace kiln::compiler {
namespace {

struct BodyCache {
  std::mutex mu;
  std::unordered_map<std::string, std::shared_ptr<const ir::Graph>> bodies;
};

BodyCache& body_cache() {
  static BodyCache c;
  return c;
}

// Checks the body against the kind's contract (see fused_op.h).
void check_body(const ir::Graph& body, const std::string& kind) {
  const auto& nodes = body.nodes();
  size_t elementwise = nodes.size();
  if (kind == "reduction") {
    KILN_CHECK(!nodes.empty() && is_fusable_reduction(*nodes.back().op),
               "a reduction body must end in sum, max, min or mean");
    elementwise -= 1;
  }
  std::optional<Shape> space;
  if (kind == "reduction") space = body.type(nodes.back().inputs[0]).shape;
  for (size_t i = 0; i < elementwise; ++i) {
    const ir::Node& n = nodes[i];
    KILN_CHECK(n.op->fusion == ir::FusionClass::elementwise && n.outputs.size() == 1, "body node ",
               i, " ('", n.op->name, "') is not a single-output elementwise op");
    const Shape& s = body.type(n.outputs[0]).shape;
    if (!space) space = s;
    KILN_CHECK(s == *space, "body node ", i, " ('", n.op->name, "') has shape ", s,
               ", not the iteration shape ", *space);
  }
}

std::vector<ir::TypeInfo> infer_fused(std::span<const ir::TypeInfo> in, const ir::Attrs& a) {
  const std::string& kind = a.s("kind");
  KILN_CHECK(kind == "elementwise" || kind == "reduction", "kind must be \"elementwise\" or ",
             "\"reduction\", got \"", kind, "\"");
  std::shared_ptr<const ir::Graph> body = fused_body(a.s("body"));
  check_body(*body, kind);
  const auto& params = body->inputs();
  KILN_CHECK(in.size() == params.size(), "the body takes ", params.size(), " inputs, the node has ",
             in.size());
  for (size_t i = 0; i < in.size(); ++i)
    KILN_CHECK(in[i] == body->type(params[i]), "input ", i, " is ", ir::to_string(in[i]),
               " but the body's input %", params[i], " is ", ir::to_string(body->type(params[i])));
  std::vector<ir::TypeInfo> out;
  for (ir::ValueId v : body->outputs()) out.push_back(body->type(v));
  return out;
}

// The work of the body; only the fused node's own inputs and outputs move
// through memory, which is the point of fusing.
ir::Cost cost_fused(std::span<const ir::TypeInfo> in, std::span<const ir::TypeInfo> out,
                    const ir::Attrs& a) {
  std::shared_ptr<const ir::Graph> body = fused_body(a.s("body"));
  ir::Cost c;
  for (const ir::Node& n : body->nodes()) {
    std::vector<ir::TypeInfo> ni, no;
    for (ir::ValueId v : n.inputs) ni.push_back(body->type(v));
    for (ir::ValueId v : n.outputs) no.push_back(body->type(v));
    c.flops += n.op->cost_of(ni, no, n.attrs).flops;
  }
  for (const auto& t : in) c.bytes += double(t.shape.numel()) * itemsize(t.dtype);
  for (const auto& t : out) c.bytes += double(t.shape.numel()) * itemsize(t.dtype);
  return c;
}

const ir::OpDef& kFused = ir::register_op({
    .name = "fused",
    .num_inputs = -1,
    .attrs = {{"body", ir::AttrKind::string, std::nullopt},
              {"kind", ir::AttrKind::string, std::nullopt}},
    .infer = infer_fused,
    .fusion = ir::FusionClass::opaque,
    .cost = cost_fused,
});

}  // namespace

const ir::OpDef& fused_op() { return kFused; }

bool is_fusable_reduction(const ir::OpDef& op) {
  return op.fusion == ir::FusionClass::reduction &&
         (op.name == "sum" || op.name == "max" || op.name == "min" || op.name == "mean");
}

std::shared_ptr<const ir::Graph> fused_body(const std::string& body) {
  BodyCache& c = body_cache();
  {
    std::lock_guard lock(c.mu);
    auto it = c.bodies.find(body);
    if (it != c.bodies.end()) return it->second;
  }
  // Parse outside the lock; a racing thread parses the same text to the same graph.
  auto g = std::make_shared<ir::Graph>();
  try {
    *g = ir::parse_graph(body);
    ir::verify(*g);
  } catch (const Error& e) {
    throw Error(cat("fused body: ", e.what()));
  }
  std::lock_guard lock(c.mu);
  return c.bodies.emplace(body, std::move(g)).first->second;
}

ir::Graph parse_fused_body(const std::string& body) { return *fused_body(body); }

}  // namespace kiln::compiler
