// Python's operators on template values, with jinja2's rules for Undefined:
// comparing with it or testing membership in it works, arithmetic and
// ordering fail; reading a missing attribute or item of a defined value gives
// Undefined, reading anything of Undefined fails.
#pragma once
#include <optional>
#include <string>

#include "kiln/data/jinja_ast.h"
#include "kiln/data/jinja_value.h"

namespace kiln::data::jinja {

// Python's ==.
bool equal(const Value& a, const Value& b);

// An arithmetic, `~` or comparison operator (not and / or / not, which the
// interpreter evaluates lazily); throws Failure on Python's TypeErrors.
Value binary_op(Op op, const Value& a, const Value& b);
// Unary - and +.
Value unary_op(Op op, const Value& a);

// A number as Python sees it (bool counts as int).
struct Number {
  bool is_float;
  int64_t i;
  double f;
  double as_double() const { return is_float ? f : double(i); }
};
std::optional<Number> number_of(const Value& v);
std::optional<Number> json_number(const Json& j);

// obj.name: a dict's key, a namespace's attribute, a loop's field.
Value get_attr(const Value& obj, const std::string& name);
// obj[key]: Python indexing (negative indices count from the end), falling
// back to an attribute for a string key, as jinja2 does.
Value get_item(const Value& obj, const Value& key);
// obj[start:stop:step] of a list or string; absent bounds are null.
Value get_slice(const Value& obj, const Value* start, const Value* stop, const Value* step);

}  // namespace kiln::data::jinja
