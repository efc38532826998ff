// The compile-cache key of a graph: three 64-bit hashes.
//  - shapeless: structure, ops, attributes, dtypes (not sizes);
//  - dims: every size of every value;
//  - options: compiler options, backend and kiln version.
// A changed attribute changes `shapeless`; a changed size changes only `dims`.
#pragma once
#include <cstdint>
#include <string>

#include "kiln/ir/graph.h"

namespace kiln::ir {

struct Fingerprint {
  uint64_t shapeless = 0;
  uint64_t dims = 0;
  uint64_t options = 0;
  friend bool operator==(const Fingerprint&, const Fingerprint&) = default;
};

struct CompileOptions {
  std::string backend = "cpu";
  std::string flags;  // the compiler's option string, e.g. "fuse=1,remat=none"
};

Fingerprint fingerprint(const Graph& g, const CompileOptions& options);
std::string to_string(const Fingerprint& f);  // 48 hex digits

}  // namespace kiln::ir
