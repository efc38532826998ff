// The GNU build IDs of the loaded kiln libraries: hashes the linker computes
// over each library's contents, so they change with any change to kiln's code
// even when KILN_VERSION does not (a developer's rebuild, a patched install).
// The compile cache's entries carry them: an optimised program or a
// generated kernel depends on the compiler, the code generator and the op
// definitions as much as on the runtime.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace kiln {

// (file, build ID in hex) of every loaded libkiln_*.so, by file name, and of
// the object holding this code where that is not one (a static build);
// an object without a build ID (linked without --build-id) has "".
const std::vector<std::pair<std::string, std::string>>& kiln_build_ids();

// One hash of kiln_build_ids(), in hex.
const std::string& kiln_build_id();

}  // namespace kiln
