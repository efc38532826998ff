// The GNU build ID of the loaded libkiln: a hash the linker computes over the
// library's contents, so it changes with any change to kiln's code even when
// KILN_VERSION does not (a developer's rebuild, a patched install).
#pragma once
#include <string>

namespace kiln {

// Hex digits, or "" when the library carries no build ID (linked without
// --build-id, or not an ELF shared object).
const std::string& kiln_build_id();

}  // namespace kiln
