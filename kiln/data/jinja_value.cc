#include "kiln/data/jinja_value.h"

#include "kiln/data/jinja_ast.h"
#include "kiln/data/jinja_error.h"
#include "kiln/data/jinja_strings.h"

namespace kiln::data::jinja {

namespace {

std::string namespace_repr(const Namespace& ns) {
  std::string out = "<Namespace {";
  for (const auto& [name, value] : ns.attrs)
    out += (out.size() > 12 ? ", " : "") + py_str_repr(name) + ": " + repr(value);
  return out + "}>";
}

std::string json_type_name(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null: return "NoneType";
    case Json::value_t::boolean: return "bool";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "int";
    case Json::value_t::number_float: return "float";
    case Json::value_t::string: return "str";
    case Json::value_t::array: return "list";
    case Json::value_t::object: return "dict";
    default: return j.type_name();
  }
}

}  // namespace

Value* Namespace::find(const std::string& name) {
  for (auto& [key, value] : attrs)
    if (key == name) return &value;
  return nullptr;
}

bool truthy(const Value& v) {
  if (v.undefined()) return false;
  const Json* j = v.data();
  if (!j) return true;  // namespaces, loops, functions, macros
  switch (j->type()) {
    case Json::value_t::null: return false;
    case Json::value_t::boolean: return j->get<bool>();
    case Json::value_t::number_integer: return j->get<int64_t>() != 0;
    case Json::value_t::number_unsigned: return j->get<uint64_t>() != 0;
    case Json::value_t::number_float: return j->get<double>() != 0.0;
    case Json::value_t::string: return !j->get_ref<const std::string&>().empty();
    default: return !j->empty();
  }
}

std::string to_str(const Value& v) {
  if (const Json* j = v.data()) return py_str(*j);
  if (v.undefined()) return "";
  return repr(v);
}

std::string repr(const Value& v) {
  if (const Json* j = v.data()) return py_repr(*j);
  if (v.undefined()) return "Undefined";
  if (auto* ns = v.as<std::shared_ptr<Namespace>>()) return namespace_repr(**ns);
  if (auto* loop = v.as<Loop>()) return cat("<LoopContext ", loop->index0 + 1, "/", loop->length, ">");
  if (auto* f = v.as<Function>()) return "<function " + f->name + ">";
  return "<Macro '" + v.as<Macro>()->def->name + "'>";
}

std::string type_name(const Value& v) {
  if (const Json* j = v.data()) return json_type_name(*j);
  if (v.undefined()) return "Undefined";
  if (v.as<std::shared_ptr<Namespace>>()) return "Namespace";
  if (v.as<Loop>()) return "LoopContext";
  if (v.as<Function>()) return "function";
  return "Macro";
}

Json to_json(const Value& v) {
  if (const Json* j = v.data()) return *j;
  if (auto* u = v.as<Undefined>()) failure(u->why);
  failure("a ", type_name(v), " cannot be stored in a list or dict here");
}

std::vector<Value> iterate(const Value& v) {
  std::vector<Value> out;
  if (v.undefined()) return out;
  const Json* j = v.data();
  if (j && j->is_array()) {
    for (const Json& item : *j) out.push_back(v.child(item));
  } else if (j && j->is_object()) {
    for (auto it = j->begin(); it != j->end(); ++it) out.emplace_back(Json(it.key()));
  } else if (j && j->is_string()) {
    for (std::string& cp : code_points(j->get_ref<const std::string&>())) out.emplace_back(Json(std::move(cp)));
  } else {
    failure("'", type_name(v), "' object is not iterable");
  }
  return out;
}

}  // namespace kiln::data::jinja
