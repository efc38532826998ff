#include "kiln/ir/op.h"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>

#include "kiln/base/error.h"
#include "kiln/base/nearest.h"

namespace kiln::ir {
namespace {

struct Registry {
  std::mutex mu;
  std::map<std::string, std::unique_ptr<OpDef>, std::less<>> ops;
};

// Never destroyed: kernels still running at exit refer to their OpDefs.
Registry& registry() {
  static auto* r = new Registry;
  return *r;
}

}  // namespace

std::string to_string(const TypeInfo& t) { return cat(dtype_name(t.dtype), t.shape); }

const char* fusion_class_name(FusionClass c) {
  switch (c) {
    case FusionClass::elementwise: return "elementwise";
    case FusionClass::reduction: return "reduction";
    case FusionClass::view: return "view";
    case FusionClass::opaque: return "opaque";
    case FusionClass::collective: return "collective";
  }
  return "?";
}

Attrs OpDef::complete_attrs(const Attrs& given) const {
  Attrs out;
  for (const auto& [k, v] : given.items()) {
    auto spec = std::find_if(attrs.begin(), attrs.end(), [&](const AttrSpec& s) { return s.name == k; });
    if (spec == attrs.end()) {
      std::string valid;
      for (const auto& s : attrs) valid += (valid.empty() ? "" : ", ") + s.name;
      fail("op '", name, "': unknown attribute '", k, "' (valid: ",
           valid.empty() ? "none" : valid, ")");
    }
    AttrValue value = v;
    // An integer literal is accepted where a float is expected.
    if (spec->kind == AttrKind::float_ && std::holds_alternative<int64_t>(v))
      value = static_cast<double>(std::get<int64_t>(v));
    KILN_CHECK(kind_of(value) == spec->kind, "op '", name, "': attribute '", k, "' must be a ",
               attr_kind_name(spec->kind), ", got a ", attr_kind_name(kind_of(v)));
    out.set(k, std::move(value));
  }
  for (const auto& s : attrs) {
    if (out.has(s.name)) continue;
    KILN_CHECK(s.default_value.has_value(), "op '", name, "': missing required attribute '",
               s.name, "' (", attr_kind_name(s.kind), ")");
    out.set(s.name, *s.default_value);
  }
  return out;
}

std::vector<TypeInfo> OpDef::infer_types(std::span<const TypeInfo> in, const Attrs& a) const {
  if (num_inputs >= 0 && static_cast<int>(in.size()) != num_inputs)
    fail("op '", name, "' takes ", num_inputs, " input(s), got ", in.size());
  try {
    return infer(in, a);
  } catch (const Error& e) {
    std::string types;
    for (const auto& t : in) types += (types.empty() ? "" : ", ") + to_string(t);
    throw Error(cat("op '", name, "' with inputs (", types, "): ", e.what()));
  }
}

Cost OpDef::cost_of(std::span<const TypeInfo> in, std::span<const TypeInfo> out,
                    const Attrs& a) const {
  if (cost) return cost(in, out, a);
  Cost c;
  for (const auto& t : in) c.bytes += double(t.shape.numel()) * itemsize(t.dtype);
  for (const auto& t : out) {
    c.bytes += double(t.shape.numel()) * itemsize(t.dtype);
    if (fusion != FusionClass::view) c.flops += double(t.shape.numel());
  }
  return c;
}

const OpDef& register_op(OpDef def) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  auto [it, inserted] = r.ops.emplace(def.name, nullptr);
  if (!inserted) fail("op '", def.name, "' is declared twice");
  it->second = std::make_unique<OpDef>(std::move(def));
  return *it->second;
}

const OpDef* find_op(std::string_view name) {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  auto it = r.ops.find(name);
  return it == r.ops.end() ? nullptr : it->second.get();
}

const OpDef& get_op(std::string_view name) {
  if (const OpDef* op = find_op(name)) return *op;
  std::vector<std::string> names;
  for (const OpDef* op : all_ops()) names.push_back(op->name);
  std::string best = nearest(name, names);
  fail("unknown op '", name, "'", best.empty() ? "" : cat("; did you mean '", best, "'?"));
}

std::vector<const OpDef*> all_ops() {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  std::vector<const OpDef*> out;
  for (auto& [k, v] : r.ops) out.push_back(v.get());
  return out;
}

}  // namespace kiln::ir
