// The values a template computes with: JSON data (shared, never copied when
// read), plus what only the engine makes: jinja2's Undefined, `namespace()`
// objects, the `loop` object, global functions and macros.
#pragma once
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "kiln/data/jinja_format.h"

namespace kiln::data::jinja {

struct Stmt;

// A missing variable, attribute or item: falsy, prints as "", iterates as
// empty; arithmetic, calls, attributes and items of it fail with `why`.
struct Undefined {
  std::string why;  // "'x' is undefined"
};
struct Loop {
  size_t index0, length;
};
struct Function {
  std::string name;  // one of the globals of jinja_builtins.h
};
struct Macro {
  const Stmt* def;
};
struct Namespace;

class Value {
 public:
  Value() : v_(Undefined{"undefined value"}) {}
  Value(Json data) : v_(std::make_shared<const Json>(std::move(data))) {}
  Value(Undefined u) : v_(std::move(u)) {}
  Value(Loop l) : v_(l) {}
  Value(Function f) : v_(std::move(f)) {}
  Value(Macro m) : v_(m) {}
  Value(std::shared_ptr<Namespace> ns) : v_(std::move(ns)) {}

  // JSON data, or null for the engine's own kinds.
  const Json* data() const {
    auto* p = std::get_if<Data>(&v_);
    return p ? p->get() : nullptr;
  }
  // `part` (inside this value's data), sharing this value's storage.
  Value child(const Json& part) const { return Value(Data(std::get<Data>(v_), &part)); }

  template <class T>
  const T* as() const {
    return std::get_if<T>(&v_);
  }
  bool undefined() const { return as<Undefined>() != nullptr; }

 private:
  using Data = std::shared_ptr<const Json>;
  explicit Value(Data d) : v_(std::move(d)) {}
  std::variant<Undefined, Data, Loop, Function, Macro, std::shared_ptr<Namespace>> v_;
};

// `namespace(a=1)`: the one mutable value; `set ns.a = 2` is seen by every
// reference to it, inside loops too.
struct Namespace {
  std::vector<std::pair<std::string, Value>> attrs;  // in the order set, for printing

  Value* find(const std::string& name);
};

// Python's bool(), str() and repr() of a value.
bool truthy(const Value& v);
std::string to_str(const Value& v);
std::string repr(const Value& v);
// Python's type name, for messages: "str", "int", "dict", "Undefined", ...
std::string type_name(const Value& v);

// The value as JSON data, to go into a list or dict; fails for the engine's
// own kinds.
Json to_json(const Value& v);

// Python's iteration: a list's items, a dict's keys, a string's code points;
// nothing for Undefined.
std::vector<Value> iterate(const Value& v);

}  // namespace kiln::data::jinja
