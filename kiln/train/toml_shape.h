// Bounds on a TOML text, checked before toml++ parses it: its parser
// recurses once per nesting level (dotted key parts, nested arrays and
// inline tables), so a hostile recipe nesting 50,000 levels overflows the
// stack. kiln's settings are `[section] key = value` with flat values; the
// limits are far above anything a recipe needs.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace kiln {

inline constexpr size_t kMaxTomlBytes = size_t(1) << 20;
inline constexpr int kMaxTomlDepth = 32;

// Fails with "<origin>:<line>: ..." when the text is larger than
// kMaxTomlBytes or nests deeper than kMaxTomlDepth.
void check_toml_shape(std::string_view text, const std::string& origin);

}  // namespace kiln
