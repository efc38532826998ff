#include "kiln/train/toml_shape.h"

#include "kiln/base/error.h"

namespace kiln {
namespace {

// Skips a string starting at text[i] (its opening quote); returns the index
// after its closing quote (or the end). Counts the newlines it passes.
size_t skip_string(std::string_view text, size_t i, int& line) {
  const char q = text[i];
  const bool multi = text.substr(i, 3) == std::string_view(q == '"' ? "\"\"\"" : "'''");
  const std::string_view close = multi ? text.substr(i, 3) : text.substr(i, 1);
  for (size_t j = i + close.size(); j < text.size(); ++j) {
    if (text[j] == '\n') {
      ++line;
      if (!multi) return j;  // unterminated: toml++ reports it
    }
    if (q == '"' && text[j] == '\\') {
      ++j;
      if (j < text.size() && text[j] == '\n') ++line;
      continue;
    }
    if (text.substr(j, close.size()) == close) return j + close.size();
  }
  return text.size();
}

}  // namespace

void check_toml_shape(std::string_view text, const std::string& origin) {
  KILN_CHECK(text.size() <= kMaxTomlBytes, origin, ": ", text.size(),
             " bytes; a recipe may have at most ", kMaxTomlBytes, " (1 MiB)");
  int line = 1, depth = 0, parts = 1;
  auto too_deep = [&] {
    fail(origin, ":", line, ": nests more than ", kMaxTomlDepth,
         " levels (dotted key parts, or arrays and inline tables inside each other); kiln's "
         "recipes are [section] key = value");
  };
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (c == '"' || c == '\'') {
      i = skip_string(text, i, line);
      continue;
    }
    if (c == '#') {
      while (i < text.size() && text[i] != '\n') ++i;
      continue;
    }
    if (c == '\n') ++line;
    if (c == '[' || c == '{') {
      if (++depth > kMaxTomlDepth) too_deep();
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    } else if (c == '.') {
      if (++parts > kMaxTomlDepth) too_deep();
    }
    if (c == '\n' || c == '=' || c == ',' || c == '[' || c == '{') parts = 1;
    ++i;
  }
}

}  // namespace kiln
