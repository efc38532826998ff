// Python's text forms of JSON data, which chat templates print: str() and
// repr() (`{{ 1.0 }}` is "1.0", `{{ [none] }}` is "[None]") and json.dumps,
// which transformers' `tojson` filter calls.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace kiln::data::jinja {

// Template values keep the order of dict keys, as Python dicts do.
using Json = nlohmann::ordered_json;

// repr() of a float: the shortest text that reads back to the same double,
// "1.0", "1e-05", "1e+16", "nan", "inf".
std::string py_float(double v);

// str() of a value: strings as they are, None / True / False, lists and
// dicts as Python writes them ("{'a': [1, 'b']}").
std::string py_str(const Json& v);
// repr() of a value: str() but with strings quoted.
std::string py_repr(const Json& v);

// json.dumps(v, ensure_ascii=..., indent=..., separators=..., sort_keys=...);
// `indent` unset is one line, `separators` unset is Python's default for it.
struct DumpOptions {
  bool ensure_ascii = false;
  std::optional<int> indent;
  std::optional<std::pair<std::string, std::string>> separators;  // item, key
  bool sort_keys = false;
};
std::string py_json_dumps(const Json& v, const DumpOptions& options);

}  // namespace kiln::data::jinja
