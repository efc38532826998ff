#include "kiln/codegen/plan.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "kiln/base/error.h"
#include "kiln/codegen/elementwise_ops.h"
#include "kiln/codegen/scalar.h"

namespace kiln::codegen {

Scalar scalar_of(DType t) {
  switch (t) {
    case DType::f32:
    case DType::bf16:
    case DType::f16: return Scalar::f32;
    case DType::f64: return Scalar::f64;
    case DType::i32: return Scalar::i32;
    case DType::i64: return Scalar::i64;
    case DType::b8: return Scalar::b8;
  }
  return Scalar::f32;
}

namespace {

struct OpInfo {
  Family family;
  const char* functor;
};

const std::unordered_map<std::string, OpInfo>& op_table() {
#define KILN_ENTRY(family, op, F) {#op, {Family::family, #F}},
#define KILN_NUMERIC_UNARY(op, F) KILN_ENTRY(numeric_unary, op, F)
#define KILN_FLOAT_UNARY(op, F) KILN_ENTRY(float_unary, op, F)
#define KILN_LOGICAL_UNARY(op, F) KILN_ENTRY(logical_unary, op, F)
#define KILN_NUMERIC_BINARY(op, F) KILN_ENTRY(numeric_binary, op, F)
#define KILN_FLOAT_BINARY(op, F) KILN_ENTRY(float_binary, op, F)
#define KILN_COMPARE(op, F) KILN_ENTRY(compare, op, F)
#define KILN_LOGICAL_BINARY(op, F) KILN_ENTRY(logical_binary, op, F)
  static const std::unordered_map<std::string, OpInfo> table = {
      KILN_NUMERIC_UNARY_OPS(KILN_NUMERIC_UNARY)
      KILN_FLOAT_UNARY_OPS(KILN_FLOAT_UNARY)
      KILN_LOGICAL_UNARY_OPS(KILN_LOGICAL_UNARY)
      KILN_NUMERIC_BINARY_OPS(KILN_NUMERIC_BINARY)
      KILN_FLOAT_BINARY_OPS(KILN_FLOAT_BINARY)
      KILN_COMPARE_OPS(KILN_COMPARE)
      KILN_LOGICAL_BINARY_OPS(KILN_LOGICAL_BINARY)
      {"gelu", {Family::gelu, ""}},
      {"where", {Family::where, ""}},
      {"cast", {Family::cast, ""}},
      {"copy", {Family::copy, ""}},
      {"full", {Family::full, ""}},
      {"arange", {Family::arange, ""}},
  };
  return table;
}

// Families whose result can need rounding to a 16-bit output; the others
// select, convert or create values that are exact in the output type.
bool may_round(Family f) {
  switch (f) {
    case Family::numeric_unary:
    case Family::float_unary:
    case Family::numeric_binary:
    case Family::float_binary:
    case Family::gelu: return true;
    default: return false;
  }
}

std::optional<ReduceKind> reduce_kind(const std::string& op) {
  if (op == "sum") return ReduceKind::sum;
  if (op == "mean") return ReduceKind::mean;
  if (op == "max") return ReduceKind::max;
  if (op == "min") return ReduceKind::min;
  return std::nullopt;
}

bool broadcasts_to(const Shape& s, const Shape& target) {
  if (s.size() > target.size()) return false;
  const int pad = target.size() - s.size();
  for (int i = 0; i < s.size(); ++i)
    if (s[i] != 1 && s[i] != target[pad + i]) return false;
  return true;
}

// The value `full` stores, in its compute type, as bits (as the eager kernel
// makes it: the double converted to the compute type, then stored).
uint64_t full_constant(double v, DType t) {
  uint64_t bits = 0;
  visit_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    C c = round_to<T>(static_cast<C>(v));
    std::memcpy(&bits, &c, sizeof(C));
  });
  return bits;
}

std::vector<char> arange_values(const ir::Attrs& a, DType t, int64_t n) {
  std::vector<char> data(size_t(n) * itemsize(t));
  const double start = a.f("start"), step = a.f("step");
  visit_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    for (int64_t i = 0; i < n; ++i) {
      T v = narrow<T>(start + double(i) * step);
      std::memcpy(data.data() + i * sizeof(T), &v, sizeof(T));
    }
  });
  return data;
}

class Planner {
 public:
  Planner(const std::string& body, const std::string& kind) : kind_(kind) {
    KILN_CHECK(kind == "elementwise" || kind == "reduction", "fused kernel: kind must be ",
               "\"elementwise\" or \"reduction\", got \"", kind, "\"");
    try {
      p_.graph = ir::parse_graph(body);
      ir::verify(p_.graph);
    } catch (const Error& e) {
      fail("fused kernel: the body is not a valid graph: ", e.what());
    }
  }

  Plan plan() {
    const auto& nodes = p_.graph.nodes();
    const auto& outs = p_.graph.outputs();
    KILN_CHECK(!outs.empty(), "fused kernel: the body returns nothing");
    find_reduction();
    if (p_.reduction) {
      p_.iteration = type(p_.reduction->input).shape;
    } else {
      p_.iteration = type(outs[0]).shape;
    }
    p_.numel = p_.iteration.numel();
    for (ir::ValueId v : p_.graph.inputs()) {
      check_broadcasts(v, "body input");
      p_.operands.push_back({OperandRole::input, type(v).dtype, type(v).shape, v});
    }
    p_.inputs = int(p_.operands.size());
    for (size_t i = 0; i < nodes.size(); ++i)
      if (!is_reduction(nodes[i])) add_instr(nodes[i]);
    for (ir::ValueId v : outs) add_output(v);
    KILN_CHECK(!p_.reduction || std::count(p_.outputs.begin(), p_.outputs.end(), -1) > 0,
               "fused kernel: the body does not return its reduction's result");
    make_order();
    std::vector<Strides> natural;
    for (const Operand& o : p_.operands) {
      const Shape& s = o.role == OperandRole::output ? p_.iteration : o.shape;
      natural.push_back(broadcast_strides(s, contiguous_strides(s), p_.iteration));
    }
    p_.natural = make_space(p_, natural);
    return std::move(p_);
  }

 private:
  const ir::TypeInfo& type(ir::ValueId v) const { return p_.graph.type(v); }
  std::string describe(const ir::Node& n) const { return ir::node_to_text(p_.graph, n); }
  bool is_reduction(const ir::Node& n) const { return n.op->fusion == ir::FusionClass::reduction; }

  void find_reduction() {
    const auto& nodes = p_.graph.nodes();
    for (size_t i = 0; i < nodes.size(); ++i) {
      const ir::Node& n = nodes[i];
      if (!is_reduction(n)) continue;
      KILN_CHECK(kind_ == "reduction", "fused kernel: an elementwise body holds the reduction '",
                 describe(n), "'; give the node kind \"reduction\"");
      KILN_CHECK(!p_.reduction, "fused kernel: a body may hold one reduction, found another: '",
                 describe(n), "'");
      KILN_CHECK(i + 1 == nodes.size(), "fused kernel: the reduction '", describe(n),
                 "' must be the body's last node");
      std::optional<ReduceKind> k = reduce_kind(n.op->name);
      KILN_CHECK(k, "fused kernel: '", describe(n), "': a fused reduction is sum, mean, max or ",
                 "min, not ", n.op->name);
      const Shape& in = type(n.inputs[0]).shape;
      std::vector<bool> reduced(size_t(in.size()), false);
      const auto& axes = n.attrs.ints("axes");
      if (axes.empty()) reduced.assign(reduced.size(), true);
      for (int64_t a : axes) reduced[normalize_axis(a, in.size(), "fused reduction")] = true;
      int64_t length = 1;
      for (int d = 0; d < in.size(); ++d)
        if (reduced[d]) length *= in[d];
      reduced_ = reduced;
      p_.reduction = Reduction{*k,
                               n.inputs[0],
                               type(n.outputs[0]).dtype,
                               length,
                               in.numel() / std::max<int64_t>(length, 1)};
      if (length == 0) p_.reduction->results = type(n.outputs[0]).shape.numel();
      result_ = n.outputs[0];
    }
    KILN_CHECK(kind_ != "reduction" || p_.reduction,
               "fused kernel: kind is \"reduction\" but the body holds no reduction");
  }

  void check_broadcasts(ir::ValueId v, const char* what) const {
    KILN_CHECK(broadcasts_to(type(v).shape, p_.iteration), "fused kernel: ", what, " %", v, " (",
               ir::to_string(type(v)), ") does not broadcast to the iteration shape ",
               p_.iteration);
  }

  void add_instr(const ir::Node& n) {
    auto it = op_table().find(n.op->name);
    KILN_CHECK(it != op_table().end() && n.outputs.size() == 1, "fused kernel: '", describe(n),
               "': op '", n.op->name, "' cannot run inside a fused kernel (only elementwise math, ",
               "comparisons, logical ops, where, cast, copy, full and arange can)");
    Instr in{.family = it->second.family, .op = n.op->name, .functor = it->second.functor};
    in.out = n.outputs[0];
    in.in = n.inputs;
    in.dtype = type(in.out).dtype;
    in.in_dtype = n.inputs.empty() ? in.dtype : type(n.inputs[0]).dtype;
    in.round = may_round(in.family) && (in.dtype == DType::bf16 || in.dtype == DType::f16);
    check_broadcasts(in.out, "value");
    if (in.family == Family::gelu) in.functor = n.attrs.b("tanh_approximation") ? "GeluTanh" : "GeluErf";
    if (in.family == Family::full) in.constant = full_constant(n.attrs.f("value"), in.dtype);
    if (in.family == Family::arange) {
      in.operand = int(p_.operands.size());
      in.start = n.attrs.f("start");
      in.step = n.attrs.f("step");
      p_.operands.push_back({OperandRole::constant, in.dtype, type(in.out).shape, in.out});
      p_.constant_data.push_back(arange_values(n.attrs, in.dtype, type(in.out).shape.numel()));
    }
    p_.instrs.push_back(std::move(in));
  }

  void add_output(ir::ValueId v) {
    if (p_.reduction && v == result_) {
      p_.outputs.push_back(-1);
      return;
    }
    KILN_CHECK(p_.graph.values()[v].node >= 0, "fused kernel: body output %", v,
               " is a body input; a fused kernel only returns values it computes");
    KILN_CHECK(type(v).shape == p_.iteration, "fused kernel: body output %", v, " (",
               ir::to_string(type(v)), ") does not have the iteration shape ", p_.iteration);
    p_.outputs.push_back(int(p_.operands.size()));
    p_.operands.push_back({OperandRole::output, type(v).dtype, p_.iteration, v});
  }

  void make_order() {
    const int rank = p_.iteration.size();
    if (!p_.reduction) {
      for (int d = 0; d < rank; ++d) p_.order.push_back(d);
      return;
    }
    int inner = rank - 1;  // the innermost axis that is not size 1
    while (inner >= 0 && p_.iteration[inner] == 1) --inner;
    Reduction& r = *p_.reduction;
    if (inner >= 0 && !reduced_[inner] && p_.iteration[inner] >= 8 && r.length > 1)
      r.columns = p_.iteration[inner];
    for (int d = 0; d < rank; ++d)
      if (!reduced_[d] && !(r.columns && d == inner)) p_.order.push_back(d);
    for (int d = 0; d < rank; ++d)
      if (reduced_[d]) p_.order.push_back(d);
    if (r.columns) p_.order.push_back(inner);
  }

  std::string kind_;
  Plan p_;
  std::vector<bool> reduced_;
  ir::ValueId result_ = -1;
};

}  // namespace

Plan make_plan(const std::string& body, const std::string& kind) { return Planner(body, kind).plan(); }

Strides broadcast_strides(const Shape& shape, const Strides& strides, const Shape& iteration) {
  Strides s = Strides::filled(iteration.size(), 0);
  const int pad = iteration.size() - shape.size();
  for (int i = 0; i < shape.size(); ++i)
    if (shape[i] != 1) s[pad + i] = strides[i];
  return s;
}

Space make_space(const Plan& p, std::span<const Strides> strides) {
  const size_t n = strides.size();
  Space sp;
  sp.strides.assign(n, Strides{});
  for (int d : p.order) {
    const int64_t size = p.iteration[d];
    if (size == 1) continue;
    bool merge = !sp.shape.empty();
    for (size_t k = 0; k < n && merge; ++k) merge = sp.strides[k].back() == strides[k][d] * size;
    if (merge) {
      int64_t m = sp.shape.back() * size;
      sp.shape.erase(sp.shape.size() - 1);
      sp.shape.push_back(m);
      for (size_t k = 0; k < n; ++k) {
        sp.strides[k].erase(sp.strides[k].size() - 1);
        sp.strides[k].push_back(strides[k][d]);
      }
    } else {
      sp.shape.push_back(size);
      for (size_t k = 0; k < n; ++k) sp.strides[k].push_back(strides[k][d]);
    }
  }
  if (sp.shape.empty()) {
    sp.shape.push_back(1);
    for (auto& s : sp.strides) s.push_back(0);
  }
  return sp;
}

Binding bind(const Plan& p, std::span<const TensorRef> in, std::span<const TensorRef> out) {
  KILN_CHECK(int(in.size()) == p.inputs, "fused kernel: the body takes ", p.inputs,
             " inputs, the kernel got ", in.size());
  KILN_CHECK(out.size() == p.outputs.size(), "fused kernel: the body returns ", p.outputs.size(),
             " values, the kernel got ", out.size(), " outputs");
  Binding b;
  std::vector<Strides> strides;
  auto check = [&](const TensorRef& r, ir::ValueId v, const char* what, size_t i) {
    const ir::TypeInfo& t = p.graph.type(v);
    KILN_CHECK(r.dtype == t.dtype && r.shape == t.shape, "fused kernel: ", what, " ", i, " is ",
               dtype_name(r.dtype), r.shape, ", the body's %", v, " is ", ir::to_string(t));
  };
  for (size_t i = 0; i < in.size(); ++i) {
    check(in[i], p.operands[i].value, "input", i);
    b.data.push_back(static_cast<char*>(in[i].data));
    strides.push_back(broadcast_strides(in[i].shape, in[i].strides, p.iteration));
  }
  size_t c = 0;
  for (size_t k = in.size(); k < p.operands.size() && p.operands[k].role == OperandRole::constant; ++k) {
    b.data.push_back(const_cast<char*>(p.constant_data[c++].data()));
    strides.push_back(broadcast_strides(p.operands[k].shape, contiguous_strides(p.operands[k].shape),
                                        p.iteration));
  }
  b.data.resize(p.operands.size());
  strides.resize(p.operands.size());
  const ir::Graph& g = p.graph;
  for (size_t i = 0; i < out.size(); ++i) {
    check(out[i], g.outputs()[i], "output", i);
    if (p.outputs[i] < 0) {
      b.results.push_back(&out[i]);
      continue;
    }
    b.data[p.outputs[i]] = static_cast<char*>(out[i].data);
    strides[p.outputs[i]] = broadcast_strides(out[i].shape, out[i].strides, p.iteration);
  }
  b.space = make_space(p, strides);
  return b;
}

}  // namespace kiln::codegen
