// The key of a compile-cache entry: the graph's three fingerprints and the
// kind of artifact stored under them ("program", "cpu_fused_so", ...), so one
// graph can own several artifacts.
#pragma once
#include <string>
#include <string_view>

#include "kiln/ir/fingerprint.h"

namespace kiln {

struct CacheKey {
  ir::Fingerprint fingerprint;
  std::string kind;
  friend bool operator==(const CacheKey&, const CacheKey&) = default;
};

// The entry's file name, "<48 hex digits>-<kind>.kce". Throws kiln::Error if
// `kind` is empty or not made of [A-Za-z0-9_] (it becomes part of a path).
std::string entry_name(const CacheKey& key);
// The kind an entry's file name holds ("program" of "<hex>-program.kce"),
// "" for a name entry_name did not make.
std::string entry_kind(std::string_view name);

}  // namespace kiln
