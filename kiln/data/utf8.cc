#include "kiln/data/utf8.h"

namespace kiln::data {

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += char(c);
  } else if (c < 0x800) {
    out += char(0xC0 | (c >> 6));
    out += char(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += char(0xE0 | (c >> 12));
    out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  } else {
    out += char(0xF0 | (c >> 18));
    out += char(0x80 | ((c >> 12) & 0x3F));
    out += char(0x80 | ((c >> 6) & 0x3F));
    out += char(0x80 | (c & 0x3F));
  }
}

namespace {

// Length of the well-formed sequence at s[i], or 0 if ill-formed; `prefix`
// gets how many bytes form the longest valid prefix (the maximal subpart).
size_t sequence_length(std::string_view s, size_t i, size_t& prefix) {
  auto at = [&](size_t k) { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0; };
  unsigned char b = at(0);
  prefix = 1;
  if (b < 0x80) return 1;
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte (Table 3-7)
  if (b >= 0xC2 && b <= 0xDF) need = 2;
  else if (b >= 0xE0 && b <= 0xEF) need = 3, lo = b == 0xE0 ? 0xA0 : 0x80, hi = b == 0xED ? 0x9F : 0xBF;
  else if (b >= 0xF0 && b <= 0xF4) need = 4, lo = b == 0xF0 ? 0x90 : 0x80, hi = b == 0xF4 ? 0x8F : 0xBF;
  else return 0;
  for (size_t k = 1; k < need; ++k) {
    if (i + k >= s.size()) return 0;
    unsigned char c = at(k);
    if (k == 1 ? (c < lo || c > hi) : (c < 0x80 || c > 0xBF)) return 0;
    prefix = k + 1;
  }
  return need;
}

}  // namespace

size_t find_invalid_utf8(std::string_view s) {
  size_t prefix;
  for (size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    size_t n = sequence_length(s, i, prefix);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

std::string to_valid_utf8(std::string_view bytes) {
  if (find_invalid_utf8(bytes) == std::string_view::npos) return std::string(bytes);
  std::string out;
  out.reserve(bytes.size() + 8);
  size_t prefix;
  for (size_t i = 0; i < bytes.size();) {
    size_t n = sequence_length(bytes, i, prefix);
    if (n) {
      out.append(bytes.substr(i, n));
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      i += prefix;
    }
  }
  return out;
}

}  // namespace kiln::data
