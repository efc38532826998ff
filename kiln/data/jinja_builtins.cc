#include "kiln/data/jinja_builtins.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <ctime>
#include <initializer_list>
#include <optional>

#include "kiln/data/jinja_error.h"
#include "kiln/data/jinja_ops.h"
#include "kiln/data/jinja_strings.h"

namespace kiln::data::jinja {

namespace {

// A call's arguments bound to the parameter names of a Python signature.
class Params {
 public:
  Params(const CallArgs& args, std::initializer_list<std::string_view> names, std::string what)
      : names_(names), what_(std::move(what)), bound_(names.size(), nullptr) {
    if (args.positional.size() > names_.size())
      failure(what_, " takes at most ", names_.size(), " argument(s), got ", args.positional.size());
    for (size_t k = 0; k < args.positional.size(); ++k) bound_[k] = &args.positional[k];
    for (const auto& [key, value] : args.keywords) {
      auto it = std::find(names_.begin(), names_.end(), key);
      if (it == names_.end()) failure(what_, " got an unexpected keyword argument '", key, "'");
      const Value*& slot = bound_[size_t(it - names_.begin())];
      if (slot) failure(what_, " got multiple values for argument '", key, "'");
      slot = &value;
    }
  }

  // The argument, or null when not given (or given as None, for `optional`).
  const Value* operator[](size_t k) const { return bound_[k]; }
  const Value* optional(size_t k) const {
    const Value* v = bound_[k];
    return v && v->data() && v->data()->is_null() ? nullptr : v;
  }
  const Value& value(size_t k, const Value& fallback) const { return bound_[k] ? *bound_[k] : fallback; }
  bool flag(size_t k, bool fallback) const { return bound_[k] ? truthy(*bound_[k]) : fallback; }
  std::optional<std::string> string(size_t k) const {
    const Value* v = optional(k);
    if (!v) return std::nullopt;
    if (!v->data() || !v->data()->is_string())
      failure(what_, ": argument '", names_[k], "' must be a string, not ", type_name(*v));
    return v->data()->get<std::string>();
  }
  int64_t integer(size_t k, int64_t fallback) const {
    const Value* v = optional(k);
    if (!v) return fallback;
    auto n = number_of(*v);
    if (!n || n->is_float) failure(what_, ": argument '", names_[k], "' must be an integer, not ", type_name(*v));
    return n->i;
  }

 private:
  std::vector<std::string_view> names_;
  std::string what_;
  std::vector<const Value*> bound_;
};

CallArgs rest_of(const CallArgs& args, size_t skip) {
  CallArgs rest{{args.positional.begin() + std::min(skip, args.positional.size()), args.positional.end()}, args.keywords};
  return rest;
}

Json list_of(const std::vector<Value>& items) {
  Json out = Json::array();
  for (const Value& v : items) out.push_back(to_json(v));
  return out;
}

const std::string* string_data(const Value& v) {
  const Json* j = v.data();
  return j && j->is_string() ? &j->get_ref<const std::string&>() : nullptr;
}

// jinja2's attribute getter of map/selectattr/join: "a.b" reads a, then b;
// a numeric part is an index.
Value attribute_of(const Value& item, const Value& attribute) {
  const std::string* path = string_data(attribute);
  if (!path) return get_item(item, attribute);
  Value v = item;
  for (const std::string& part : py_split(*path, std::string("."), -1)) {
    bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    v = get_item(v, numeric ? Json(std::stoll(part)) : Json(part));
  }
  return v;
}

// Python's int(text, base): whitespace around, a sign, the base's prefix,
// underscores between digits.
std::optional<int64_t> parse_int(const std::string& text, int64_t base) {
  std::string s = py_strip(text, std::nullopt, true, true);
  bool negative = !s.empty() && s[0] == '-';
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) s.erase(0, 1);
  static const std::pair<int64_t, char> kPrefix[] = {{16, 'x'}, {8, 'o'}, {2, 'b'}};
  for (auto [b, letter] : kPrefix)
    if (base == b && s.size() > 2 && s[0] == '0' && std::tolower(static_cast<unsigned char>(s[1])) == letter) s.erase(0, 2);
  std::string digits;
  for (size_t k = 0; k < s.size(); ++k) {
    if (s[k] != '_') digits += s[k];
    else if (k == 0 || k + 1 == s.size() || s[k + 1] == '_') return std::nullopt;
  }
  int64_t v = 0;
  if (digits.empty() || base < 2 || base > 36) return std::nullopt;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v, int(base));
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  return negative ? -v : v;
}

// Python's float(text): whitespace around, a sign, digits with underscores,
// "inf" and "nan".
std::optional<double> parse_float(const std::string& text) {
  std::string s = py_strip(text, std::nullopt, true, true);
  bool negative = !s.empty() && s[0] == '-';
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) s.erase(0, 1);
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return negative ? -v : v;
}

// A float's integer part, when it has one an int64 holds.
std::optional<int64_t> truncated(double v) {
  if (!std::isfinite(v) || std::fabs(v) >= 9.2e18) return std::nullopt;
  return int64_t(std::trunc(v));
}

const Value& none_value() {
  static const Value none(Json(nullptr));
  return none;
}

// ---- filters ----

Value length(const Value& in, const CallArgs& args) {
  Params(args, {}, "filter 'length'");
  if (in.undefined()) return Json(0);
  const Json* j = in.data();
  if (j && j->is_string()) return Json(int64_t(code_point_starts(j->get_ref<const std::string&>()).size() - 1));
  if (j && (j->is_array() || j->is_object())) return Json(int64_t(j->size()));
  failure("object of type '", type_name(in), "' has no len()");
}

Value trim(const Value& in, const CallArgs& args) {
  Params p(args, {"chars"}, "filter 'trim'");
  return Json(py_strip(to_str(in), p.string(0), true, true));
}

Value tojson(const Value& in, const CallArgs& args) {
  Params p(args, {"ensure_ascii", "indent", "separators", "sort_keys"}, "filter 'tojson'");
  DumpOptions o;
  o.ensure_ascii = p.flag(0, false);
  if (p.optional(1)) o.indent = int(p.integer(1, 0));
  if (const Value* sep = p.optional(2)) {
    const Json* j = sep->data();
    if (!j || !j->is_array() || j->size() != 2 || !(*j)[0].is_string() || !(*j)[1].is_string())
      failure("filter 'tojson': separators must be two strings");
    o.separators = {(*j)[0].get<std::string>(), (*j)[1].get<std::string>()};
  }
  o.sort_keys = p.flag(3, false);
  if (auto* u = in.as<Undefined>()) failure("tojson of an undefined value: ", u->why);
  return Json(py_json_dumps(to_json(in), o));
}

template <std::string (*Map)(std::string_view)>
Value text_filter(const Value& in, const CallArgs& args) {
  Params(args, {}, "a text filter");
  return Json(Map(to_str(in)));
}

Value default_(const Value& in, const CallArgs& args) {
  Params p(args, {"default_value", "boolean"}, "filter 'default'");
  static const Value empty(Json(""));
  if (in.undefined() || (p.flag(1, false) && !truthy(in))) return p.value(0, empty);
  return in;
}

Value join(const Value& in, const CallArgs& args) {
  Params p(args, {"d", "attribute"}, "filter 'join'");
  std::string sep = p.string(0).value_or(""), out;
  bool first = true;
  for (const Value& item : iterate(in)) {
    if (!first) out += sep;
    first = false;
    out += to_str(p.optional(1) ? attribute_of(item, *p[1]) : item);
  }
  return Json(out);
}

Value first(const Value& in, const CallArgs& args) {
  Params(args, {}, "filter 'first'");
  std::vector<Value> items = iterate(in);
  return items.empty() ? Value(Undefined{"No first item, sequence was empty."}) : items.front();
}

Value last(const Value& in, const CallArgs& args) {
  Params(args, {}, "filter 'last'");
  std::vector<Value> items = iterate(in);
  return items.empty() ? Value(Undefined{"No last item, sequence was empty."}) : items.back();
}

Value string(const Value& in, const CallArgs& args) {
  Params(args, {}, "filter 'string'");
  return Json(to_str(in));
}

// jinja2's int filter: int(value), else int(float(value)), else the default.
Value int_(const Value& in, const CallArgs& args) {
  Params p(args, {"default", "base"}, "filter 'int'");
  static const Value zero(Json(0));
  if (auto* u = in.as<Undefined>()) failure(u->why);
  std::optional<int64_t> v;
  if (auto n = number_of(in)) {
    v = n->is_float ? truncated(n->f) : n->i;
  } else if (const std::string* s = string_data(in)) {
    v = parse_int(*s, p.integer(1, 10));
    if (!v)
      if (auto f = parse_float(*s)) v = truncated(*f);
  }
  return v ? Value(Json(*v)) : p.value(0, zero);
}

// jinja2's float filter: float(value), else the default.
Value float_(const Value& in, const CallArgs& args) {
  Params p(args, {"default"}, "filter 'float'");
  static const Value zero(Json(0.0));
  if (auto* u = in.as<Undefined>()) failure(u->why);
  std::optional<double> v;
  if (auto n = number_of(in)) v = n->as_double();
  else if (const std::string* s = string_data(in)) v = parse_float(*s);
  return v ? Value(Json(*v)) : p.value(0, zero);
}

Value list(const Value& in, const CallArgs& args) {
  Params(args, {}, "filter 'list'");
  return list_of(iterate(in));
}

Value items(const Value& in, const CallArgs& args) {
  Params(args, {}, "filter 'items'");
  if (in.undefined()) return Json::array();
  const Json* j = in.data();
  if (!j || !j->is_object()) failure("filter 'items' needs a mapping, not ", type_name(in));
  Json out = Json::array();
  for (auto it = j->begin(); it != j->end(); ++it) out.push_back(Json::array({it.key(), *it}));
  return out;
}

Value replace(const Value& in, const CallArgs& args) {
  Params p(args, {"old", "new", "count"}, "filter 'replace'");
  return Json(py_replace(to_str(in), to_str(p.value(0, none_value())), to_str(p.value(1, none_value())), p.integer(2, -1)));
}

Value abs_(const Value& in, const CallArgs& args) {
  Params(args, {}, "filter 'abs'");
  auto n = number_of(in);
  if (!n) failure("bad operand type for abs(): '", type_name(in), "'");
  return n->is_float ? unary_op(Op::pos, Value(Json(std::fabs(n->f)))) : unary_op(n->i < 0 ? Op::neg : Op::pos, in);
}

Value reverse(const Value& in, const CallArgs& args) {
  Params(args, {}, "filter 'reverse'");
  if (const std::string* s = string_data(in)) {
    std::vector<std::string> chars = code_points(*s);
    std::string out;
    for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += *it;
    return Json(out);
  }
  std::vector<Value> items = iterate(in);
  std::reverse(items.begin(), items.end());
  return list_of(items);
}

// map('filter', args...) or map(attribute='x', default=...).
Value map(const Value& in, const CallArgs& args) {
  std::vector<Value> out;
  if (args.positional.empty()) {
    Params p(args, {"attribute", "default"}, "filter 'map'");
    if (!p[0]) failure("filter 'map' needs a filter name or attribute=");
    for (const Value& item : iterate(in)) {
      Value v = attribute_of(item, *p[0]);
      out.push_back(v.undefined() && p[1] ? *p[1] : v);
    }
    return list_of(out);
  }
  const std::string* name = string_data(args.positional[0]);
  if (!name || !is_filter(*name)) failure("filter 'map': unsupported filter ", repr(args.positional[0]));
  CallArgs rest = rest_of(args, 1);
  for (const Value& item : iterate(in)) out.push_back(apply_filter(*name, item, rest));
  return list_of(out);
}

// select / reject / selectattr / rejectattr: the items for which the test
// (or truthiness) is `keep`, read through an attribute for the *attr forms.
template <bool keep, bool by_attribute>
Value select(const Value& in, const CallArgs& args) {
  size_t skip = by_attribute ? 1 : 0;
  if (by_attribute && args.positional.empty()) failure("filter 'selectattr' needs an attribute name");
  const Value* test = args.positional.size() > skip ? &args.positional[skip] : nullptr;
  const std::string* name = test ? string_data(*test) : nullptr;
  if (test && (!name || !is_test(*name))) failure("select filters: unsupported test ", repr(*test));
  CallArgs rest = rest_of(args, skip + 1);
  Json out = Json::array();
  for (const Value& item : iterate(in)) {
    Value subject = by_attribute ? attribute_of(item, args.positional[0]) : item;
    if ((name ? apply_test(*name, subject, rest) : truthy(subject)) == keep) out.push_back(to_json(item));
  }
  return out;
}

using Filter = Value (*)(const Value&, const CallArgs&);
const std::pair<std::string_view, Filter> kFilters[] = {
    {"abs", abs_},
    {"capitalize", text_filter<py_capitalize>},
    {"count", length},
    {"d", default_},
    {"default", default_},
    {"first", first},
    {"float", float_},
    {"int", int_},
    {"items", items},
    {"join", join},
    {"last", last},
    {"length", length},
    {"list", list},
    {"lower", text_filter<py_lower>},
    {"map", map},
    {"reject", select<false, false>},
    {"rejectattr", select<false, true>},
    {"replace", replace},
    {"reverse", reverse},
    {"select", select<true, false>},
    {"selectattr", select<true, true>},
    {"string", string},
    {"title", text_filter<jinja_title>},
    {"tojson", tojson},
    {"trim", trim},
    {"upper", text_filter<py_upper>},
};

// ---- tests ----

bool data_is(const Value& v, bool (Json::*kind)() const noexcept) {
  const Json* j = v.data();
  return j && (j->*kind)();
}

template <Op op>
bool compare_test(const Value& in, const CallArgs& args) {
  Params p(args, {"other"}, "a comparison test");
  return truthy(binary_op(op, in, p.value(0, none_value())));
}

template <bool even>
bool parity(const Value& in, const CallArgs& args) {
  Params(args, {}, even ? "test 'even'" : "test 'odd'");
  return truthy(binary_op(Op::eq, binary_op(Op::mod, in, Value(Json(2))), Value(Json(even ? 0 : 1))));
}

bool divisibleby(const Value& in, const CallArgs& args) {
  Params p(args, {"num"}, "test 'divisibleby'");
  return truthy(binary_op(Op::eq, binary_op(Op::mod, in, p.value(0, none_value())), Value(Json(0))));
}

// Python's str.islower() / isupper(): some cased letters, none of the other case.
template <bool lower>
bool letter_case(const Value& in, const CallArgs& args) {
  Params(args, {}, lower ? "test 'lower'" : "test 'upper'");
  std::string s = to_str(in);
  return lower ? py_lower(s) == s && py_upper(s) != s : py_upper(s) == s && py_lower(s) != s;
}

using Test = bool (*)(const Value&, const CallArgs&);
#define KILN_JINJA_TEST(name, expr) \
  {name, [](const Value& v, const CallArgs& args) { return Params(args, {}, "test '" name "'"), bool(expr); }}
const std::pair<std::string_view, Test> kTests[] = {
    KILN_JINJA_TEST("boolean", data_is(v, &Json::is_boolean)),
    KILN_JINJA_TEST("callable", v.as<Function>() || v.as<Macro>()),
    KILN_JINJA_TEST("defined", !v.undefined()),
    {"divisibleby", divisibleby},
    {"eq", compare_test<Op::eq>},
    {"equalto", compare_test<Op::eq>},
    {"even", parity<true>},
    KILN_JINJA_TEST("false", data_is(v, &Json::is_boolean) && !v.data()->get<bool>()),
    KILN_JINJA_TEST("float", data_is(v, &Json::is_number_float)),
    {"ge", compare_test<Op::ge>},
    {"greaterthan", compare_test<Op::gt>},
    {"gt", compare_test<Op::gt>},
    {"in", [](const Value& v, const CallArgs& args) {
       Params p(args, {"seq"}, "test 'in'");
       return truthy(binary_op(Op::in, v, p.value(0, none_value())));
     }},
    KILN_JINJA_TEST("integer", data_is(v, &Json::is_number_integer)),
    KILN_JINJA_TEST("iterable", v.undefined() || data_is(v, &Json::is_string) || data_is(v, &Json::is_structured)),
    {"le", compare_test<Op::le>},
    {"lessthan", compare_test<Op::lt>},
    {"lower", letter_case<true>},
    {"lt", compare_test<Op::lt>},
    KILN_JINJA_TEST("mapping", data_is(v, &Json::is_object)),
    {"ne", compare_test<Op::ne>},
    KILN_JINJA_TEST("none", data_is(v, &Json::is_null)),
    KILN_JINJA_TEST("number", data_is(v, &Json::is_number) || data_is(v, &Json::is_boolean)),
    {"odd", parity<false>},
    KILN_JINJA_TEST("sequence", v.undefined() || data_is(v, &Json::is_string) || data_is(v, &Json::is_structured)),
    KILN_JINJA_TEST("string", data_is(v, &Json::is_string)),
    KILN_JINJA_TEST("true", data_is(v, &Json::is_boolean) && v.data()->get<bool>()),
    KILN_JINJA_TEST("undefined", v.undefined()),
    {"upper", letter_case<false>},
};
#undef KILN_JINJA_TEST

// ---- global functions ----

// The attributes of namespace(...) and dict(...): an optional mapping, then keywords.
std::vector<std::pair<std::string, Value>> mapping_args(const CallArgs& args, const char* what) {
  if (args.positional.size() > 1) failure(what, "() takes at most 1 positional argument");
  std::vector<std::pair<std::string, Value>> out;
  auto put = [&](const std::string& key, Value v) {  // a later value for a key replaces the earlier
    auto it = std::find_if(out.begin(), out.end(), [&](auto& kv) { return kv.first == key; });
    if (it != out.end()) it->second = std::move(v);
    else out.emplace_back(key, std::move(v));
  };
  if (!args.positional.empty()) {
    const Value& m = args.positional[0];
    if (!data_is(m, &Json::is_object)) failure(what, "() takes a mapping, not ", type_name(m));
    for (auto it = m.data()->begin(); it != m.data()->end(); ++it) put(it.key(), m.child(*it));
  }
  for (const auto& [key, value] : args.keywords) put(key, value);
  return out;
}

Value namespace_(const CallArgs& args) {
  auto ns = std::make_shared<Namespace>();
  ns->attrs = mapping_args(args, "namespace");
  for (const auto& [key, value] : ns->attrs)
    if (!key.empty() && key[0] == '_') failure("namespace attributes cannot start with '_': '", key, "'");
  return ns;
}

Value dict(const CallArgs& args) {
  Json out = Json::object();
  for (const auto& [key, value] : mapping_args(args, "dict")) out[key] = to_json(value);
  return out;
}

Value range(const CallArgs& args) {
  Params p(args, {"start", "stop", "step"}, "range()");
  bool one = !p[1];  // range(stop)
  int64_t start = one ? 0 : p.integer(0, 0), stop = one ? p.integer(0, 0) : p.integer(1, 0), step = p.integer(2, 1);
  if (step == 0) failure("range() arg 3 must not be zero");
  Json out = Json::array();
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (out.size() >= 100000) failure("range() too big: at most 100000 items (jinja2's sandbox limit)");
    out.push_back(i);
  }
  return out;
}

// transformers' global: a template's error, its message for the user.
Value raise_exception(const CallArgs& args) {
  Params p(args, {"message"}, "raise_exception()");
  failure(to_str(p.value(0, none_value())));
}

Value strftime_now(const CallArgs& args) {
  Params p(args, {"format"}, "strftime_now()");
  std::string format = p.string(0).value_or("");
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  std::string out(format.size() * 4 + 64, '\0');
  size_t n = std::strftime(out.data(), out.size(), format.c_str(), &local);
  out.resize(n);
  return Json(out);
}

using Global = Value (*)(const CallArgs&);
const std::pair<std::string_view, Global> kGlobals[] = {
    {"dict", dict},
    {"namespace", namespace_},
    {"raise_exception", raise_exception},
    {"range", range},
    {"strftime_now", strftime_now},
};

// ---- methods ----

Value str_method(const std::string& s, std::string_view name, const CallArgs& args) {
  std::string what = "str." + std::string(name) + "()";
  if (name == "startswith" || name == "endswith") {
    Params p(args, {"prefix"}, what);
    const Value& arg = p.value(0, none_value());
    std::vector<Value> options = data_is(arg, &Json::is_array) ? iterate(arg) : std::vector<Value>{arg};
    for (const Value& o : options) {
      const std::string* affix = string_data(o);
      if (!affix) failure(what, " takes a string or a tuple of strings, not ", type_name(o));
      bool hit = s.size() >= affix->size() &&
                 (name == "startswith" ? s.compare(0, affix->size(), *affix) == 0
                                       : s.compare(s.size() - affix->size(), affix->size(), *affix) == 0);
      if (hit) return Json(true);
    }
    return Json(false);
  }
  if (name == "split") {
    Params p(args, {"sep", "maxsplit"}, what);
    return Json(py_split(s, p.string(0), long(p.integer(1, -1))));
  }
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    Params p(args, {"chars"}, what);
    return Json(py_strip(s, p.string(0), name != "rstrip", name != "lstrip"));
  }
  if (name == "replace") {
    Params p(args, {"old", "new", "count"}, what);
    if (!p.optional(0) || !p.optional(1)) failure(what, " needs the old and new strings");
    return Json(py_replace(s, *p.string(0), *p.string(1), long(p.integer(2, -1))));
  }
  static const std::pair<std::string_view, std::string (*)(std::string_view)> kCase[] = {
      {"upper", py_upper}, {"lower", py_lower}, {"title", py_title}, {"capitalize", py_capitalize}};
  for (const auto& [method, map_case] : kCase) {
    if (name != method) continue;
    Params(args, {}, what);
    return Json(map_case(s));
  }
  failure("unsupported method '", name, "' of a str");
}

Value dict_method(const Value& self, std::string_view name, const CallArgs& args) {
  const Json& d = *self.data();
  std::string what = "dict." + std::string(name) + "()";
  if (name == "get") {
    Params p(args, {"key", "default"}, what);
    const std::string* key = p[0] ? string_data(*p[0]) : nullptr;
    auto it = key ? d.find(*key) : d.end();
    return it != d.end() ? self.child(*it) : p.value(1, none_value());
  }
  if (name != "items" && name != "keys" && name != "values") failure("unsupported method '", name, "' of a dict");
  Params(args, {}, what);
  Json out = Json::array();
  for (auto it = d.begin(); it != d.end(); ++it) {
    if (name == "items") out.push_back(Json::array({it.key(), *it}));
    else out.push_back(name == "keys" ? Json(it.key()) : *it);
  }
  return out;
}

}  // namespace

bool is_filter(std::string_view name) {
  return std::any_of(std::begin(kFilters), std::end(kFilters), [&](auto& f) { return f.first == name; });
}

bool is_test(std::string_view name) {
  return std::any_of(std::begin(kTests), std::end(kTests), [&](auto& t) { return t.first == name; });
}

bool is_global(std::string_view name) {
  return std::any_of(std::begin(kGlobals), std::end(kGlobals), [&](auto& g) { return g.first == name; });
}

Value apply_filter(std::string_view name, const Value& input, const CallArgs& args) {
  for (const auto& [n, f] : kFilters)
    if (n == name) return f(input, args);
  failure("unsupported filter '", name, "'");
}

bool apply_test(std::string_view name, const Value& input, const CallArgs& args) {
  for (const auto& [n, t] : kTests)
    if (n == name) return t(input, args);
  failure("unsupported test '", name, "'");
}

Value call_global(std::string_view name, const CallArgs& args) {
  for (const auto& [n, g] : kGlobals)
    if (n == name) return g(args);
  failure("'", name, "' is not a global function");
}

Value call_method(const Value& self, std::string_view name, const CallArgs& args) {
  if (auto* u = self.as<Undefined>()) failure(u->why);
  if (const std::string* s = string_data(self)) return str_method(*s, name, args);
  if (data_is(self, &Json::is_object)) return dict_method(self, name, args);
  failure("unsupported method '", name, "' of a ", type_name(self));
}

}  // namespace kiln::data::jinja
