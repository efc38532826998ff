#include "kiln/ir/attrs.h"

#include <algorithm>
#include <cstdio>

#include "kiln/base/error.h"

namespace kiln::ir {

const char* attr_kind_name(AttrKind k) {
  switch (k) {
    case AttrKind::int_: return "int";
    case AttrKind::float_: return "float";
    case AttrKind::bool_: return "bool";
    case AttrKind::string: return "string";
    case AttrKind::ints: return "int list";
    case AttrKind::dtype: return "dtype";
  }
  return "?";
}

AttrKind kind_of(const AttrValue& v) { return static_cast<AttrKind>(v.index()); }

Attrs::Attrs(std::initializer_list<std::pair<std::string, AttrValue>> items) {
  for (auto& [k, v] : items) set(k, v);
}

void Attrs::set(const std::string& name, AttrValue v) {
  auto it = std::lower_bound(items_.begin(), items_.end(), name,
                             [](const auto& p, const std::string& n) { return p.first < n; });
  if (it != items_.end() && it->first == name)
    it->second = std::move(v);
  else
    items_.insert(it, {name, std::move(v)});
}

const AttrValue* Attrs::find(const std::string& name) const {
  auto it = std::lower_bound(items_.begin(), items_.end(), name,
                             [](const auto& p, const std::string& n) { return p.first < n; });
  return it != items_.end() && it->first == name ? &it->second : nullptr;
}

template <class T>
const T& Attrs::get(const std::string& name) const {
  const AttrValue* v = find(name);
  KILN_CHECK(v, "missing attribute '", name, "'");
  const T* t = std::get_if<T>(v);
  KILN_CHECK(t, "attribute '", name, "' is a ", attr_kind_name(kind_of(*v)), ", not a ",
             attr_kind_name(kind_of(AttrValue(T{}))));
  return *t;
}

int64_t Attrs::i(const std::string& name) const { return get<int64_t>(name); }
double Attrs::f(const std::string& name) const {
  const AttrValue* v = find(name);
  if (v && std::holds_alternative<int64_t>(*v)) return static_cast<double>(std::get<int64_t>(*v));
  return get<double>(name);
}
bool Attrs::b(const std::string& name) const { return get<bool>(name); }
const std::string& Attrs::s(const std::string& name) const { return get<std::string>(name); }
const IntList& Attrs::ints(const std::string& name) const { return get<IntList>(name); }
DType Attrs::dtype(const std::string& name) const { return get<DType>(name); }

std::string to_string(const AttrValue& v) {
  struct Printer {
    std::string operator()(int64_t x) const { return std::to_string(x); }
    std::string operator()(double x) const {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.17g", x);
      std::string s = buf;
      // Keep floats recognisable as floats when parsed back.
      if (s.find_first_of(".eEni") == std::string::npos) s += ".0";
      return s;
    }
    std::string operator()(bool x) const { return x ? "true" : "false"; }
    std::string operator()(const std::string& x) const {
      std::string out = "\"";
      for (char c : x) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
      }
      return out + "\"";
    }
    std::string operator()(const IntList& x) const {
      std::string out = "[";
      for (size_t i = 0; i < x.size(); ++i) out += (i ? "," : "") + std::to_string(x[i]);
      return out + "]";
    }
    std::string operator()(DType x) const { return dtype_name(x); }
  };
  return std::visit(Printer{}, v);
}

}  // namespace kiln::ir
