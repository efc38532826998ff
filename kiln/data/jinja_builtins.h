// The filters, tests, global functions and methods templates can call: the
// ones Hugging Face chat templates use, with jinja2's and Python's semantics
// (transformers' `tojson`, `raise_exception` and `strftime_now` included).
// Anything else is refused by name.
#pragma once
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/data/jinja_value.h"

namespace kiln::data::jinja {

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keywords;
};

bool is_filter(std::string_view name);
bool is_test(std::string_view name);
bool is_global(std::string_view name);

// `input | name(args)`, `input is name(args)`, `name(args)` of a global
// function and `self.name(args)` of a str or dict method. Failures are
// thrown as Failure, raise_exception's with its message.
Value apply_filter(std::string_view name, const Value& input, const CallArgs& args);
bool apply_test(std::string_view name, const Value& input, const CallArgs& args);
Value call_global(std::string_view name, const CallArgs& args);
Value call_method(const Value& self, std::string_view name, const CallArgs& args);

}  // namespace kiln::data::jinja
