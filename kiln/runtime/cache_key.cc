#include "kiln/runtime/cache_key.h"

#include "kiln/base/error.h"

namespace kiln {

std::string entry_name(const CacheKey& key) {
  bool ok = !key.kind.empty() && key.kind.size() <= 64;
  for (char c : key.kind) {
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_');
  }
  KILN_CHECK(ok, "compile cache: kind '", key.kind,
             "' must be 1-64 characters of [A-Za-z0-9_] (it is part of the entry's file name)");
  return ir::to_string(key.fingerprint) + "-" + key.kind + ".kce";
}

std::string entry_kind(std::string_view name) {
  const size_t dash = name.find('-');
  if (dash == std::string_view::npos || !name.ends_with(".kce")) return "";
  return std::string(name.substr(dash + 1, name.size() - dash - 1 - 4));
}

}  // namespace kiln
