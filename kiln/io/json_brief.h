// A short rendering of a JSON value for error messages. Unlike
// nlohmann::json::dump() it never recurses: a hostile file can nest arrays
// millions deep (nlohmann parses and frees those without recursion), and
// dumping one would overflow the stack. Scalars and arrays of scalars are
// shown as JSON (cut to 80 characters); anything nested by its type.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "kiln/base/error.h"

namespace kiln {

inline std::string json_brief(const nlohmann::json& j) {
  constexpr size_t kMax = 80;
  auto cut = [&](std::string s) { return s.size() > kMax ? s.substr(0, kMax) + "..." : s; };
  if (j.is_primitive()) return cut(j.dump());
  if (j.is_array()) {
    std::string s = "[";
    for (size_t i = 0; i < j.size(); ++i) {
      if (!j[i].is_primitive()) return cat("an array of ", j.size(), " elements");
      s += (i ? "," : "") + j[i].dump();
      if (s.size() > kMax) return cut(s);
    }
    return s + "]";
  }
  return cat("an object of ", j.size(), " keys");
}

}  // namespace kiln
