#include "kiln/data/jinja_strings.h"

#include <unicode/uchar.h>
#include <unicode/ucasemap.h>

#include <algorithm>
#include <cstdio>
#include <memory>

#include "kiln/base/error.h"
#include "kiln/data/jinja_error.h"
#include "kiln/data/utf8.h"

namespace kiln::data::jinja {

namespace {

std::string encode(char32_t c) {
  std::string out;
  append_utf8(out, c);
  return out;
}

bool in_chars(char32_t c, const std::optional<std::string>& chars) {
  if (!chars) return py_isspace(c);
  for (size_t i = 0, len = 0; i < chars->size(); i += len)
    if (decode_at(*chars, i, len) == c) return true;
  return false;
}

enum class Case { upper, lower };

// ICU's full case mapping with the root locale, which is Python's (no
// locale-specific rules such as Turkish dotless i).
std::string map_case(std::string_view s, Case which) {
  UErrorCode err = U_ZERO_ERROR;
  std::unique_ptr<UCaseMap, decltype(&ucasemap_close)> map(ucasemap_open("", 0, &err), ucasemap_close);
  KILN_CHECK(U_SUCCESS(err), "ICU case mapping unavailable: ", u_errorName(err));
  std::string out(s.size() * 3 + 8, '\0');  // case mapping grows text at most threefold
  auto run = which == Case::upper ? ucasemap_utf8ToUpper : ucasemap_utf8ToLower;
  int32_t n = run(map.get(), out.data(), int32_t(out.size()), s.data(), int32_t(s.size()), &err);
  KILN_CHECK(U_SUCCESS(err), "ICU case mapping failed: ", u_errorName(err));
  out.resize(size_t(n));
  return out;
}

bool is_cased(char32_t c) { return u_hasBinaryProperty(UChar32(c), UCHAR_CASED); }

bool is_printable(char32_t c) {
  if (c == ' ') return true;
  switch (u_charType(UChar32(c))) {
    case U_CONTROL_CHAR:
    case U_FORMAT_CHAR:
    case U_SURROGATE:
    case U_PRIVATE_USE_CHAR:
    case U_UNASSIGNED:
    case U_LINE_SEPARATOR:
    case U_PARAGRAPH_SEPARATOR:
    case U_SPACE_SEPARATOR:
      return false;
    default:
      return true;
  }
}

}  // namespace

char32_t decode_at(std::string_view s, size_t i, size_t& len) {
  auto b = static_cast<unsigned char>(s[i]);
  len = b < 0x80 ? 1 : b < 0xC2 ? 0 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : b < 0xF5 ? 4 : 0;
  if (len == 0 || i + len > s.size()) return len = 1, b;
  for (size_t k = 1; k < len; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return len = 1, b;
  if (len == 1) return b;
  char32_t c = b & (0x7F >> len);
  for (size_t k = 1; k < len; ++k) c = (c << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  return c;
}

bool py_isspace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

std::vector<size_t> code_point_starts(std::string_view s) {
  std::vector<size_t> starts;
  for (size_t i = 0, len = 0; i < s.size(); i += len) {
    starts.push_back(i);
    decode_at(s, i, len);
  }
  starts.push_back(s.size());
  return starts;
}

std::vector<std::string> code_points(std::string_view s) {
  std::vector<size_t> at = code_point_starts(s);
  std::vector<std::string> out;
  for (size_t k = 0; k + 1 < at.size(); ++k) out.emplace_back(s.substr(at[k], at[k + 1] - at[k]));
  return out;
}

std::string py_strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                     bool right) {
  std::vector<size_t> at = code_point_starts(s);
  size_t first = 0, last = at.size() - 1;  // code point indices [first, last)
  size_t len = 0;
  while (left && first < last && in_chars(decode_at(s, at[first], len), chars)) ++first;
  while (right && last > first && in_chars(decode_at(s, at[last - 1], len), chars)) --last;
  return std::string(s.substr(at[first], at[last] - at[first]));
}

std::vector<std::string> py_split(std::string_view s, const std::optional<std::string>& sep,
                                  long maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    if (sep->empty()) failure("str.split: empty separator");
    size_t from = 0;
    for (size_t hit; (maxsplit < 0 || long(out.size()) < maxsplit) &&
                     (hit = s.find(*sep, from)) != std::string_view::npos;
         from = hit + sep->size())
      out.emplace_back(s.substr(from, hit - from));
    out.emplace_back(s.substr(from));
    return out;
  }
  size_t i = 0, len = 0;
  auto space_at = [&](size_t k) { return py_isspace(decode_at(s, k, len)); };
  auto skip_space = [&] {
    while (i < s.size() && space_at(i)) i += len;
  };
  while (maxsplit < 0 || long(out.size()) < maxsplit) {
    skip_space();
    if (i == s.size()) return out;
    size_t start = i;
    while (i < s.size() && !space_at(i)) i += len;
    out.emplace_back(s.substr(start, i - start));
  }
  skip_space();  // the limit was reached: the rest is one piece, leading whitespace dropped
  if (i < s.size()) out.emplace_back(s.substr(i));
  return out;
}

std::string py_replace(std::string_view s, std::string_view old, std::string_view with, long count) {
  std::string out;
  if (old.empty()) {  // Python inserts `with` around every code point
    std::vector<size_t> at = code_point_starts(s);
    for (size_t k = 0; k + 1 < at.size(); ++k) {
      if (count < 0 || long(k) < count) out += with;
      out += s.substr(at[k], at[k + 1] - at[k]);
    }
    if (count < 0 || long(at.size() - 1) < count) out += with;
    return out;
  }
  size_t from = 0;
  for (size_t hit; count != 0 && (hit = s.find(old, from)) != std::string_view::npos; --count) {
    out.append(s.substr(from, hit - from)).append(with);
    from = hit + old.size();
  }
  return out.append(s.substr(from));
}

std::string py_upper(std::string_view s) { return map_case(s, Case::upper); }
std::string py_lower(std::string_view s) { return map_case(s, Case::lower); }

std::string py_title(std::string_view s) {
  std::string out;
  bool after_cased = false;
  for (size_t i = 0, len = 0; i < s.size(); i += len) {
    char32_t c = decode_at(s, i, len);
    append_utf8(out, after_cased ? u_tolower(UChar32(c)) : u_totitle(UChar32(c)));
    after_cased = is_cased(c);
  }
  return out;
}

std::string py_capitalize(std::string_view s) {
  if (s.empty()) return "";
  size_t len = 0;
  char32_t first = decode_at(s, 0, len);
  return encode(u_totitle(UChar32(first))) + py_lower(s.substr(len));
}

std::string jinja_title(std::string_view s) {
  std::string out;
  bool word_start = true;
  for (size_t i = 0, len = 0; i < s.size(); i += len) {
    char32_t c = decode_at(s, i, len);
    std::string_view one = s.substr(i, len);
    bool separator = py_isspace(c) || (c < 0x80 && std::string_view("-({[<").find(char(c)) != std::string_view::npos);
    out += separator ? std::string(one) : word_start ? py_upper(one) : py_lower(one);
    word_start = separator;
  }
  return out;
}

std::string py_str_repr(std::string_view s) {
  bool has_single = s.find('\'') != std::string_view::npos;
  char quote = has_single && s.find('"') == std::string_view::npos ? '"' : '\'';
  std::string out(1, quote);
  for (size_t i = 0, len = 0; i < s.size(); i += len) {
    char32_t c = decode_at(s, i, len);
    char buf[16];
    if (c == char32_t(quote) || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (is_printable(c)) {
      out += s.substr(i, len);
    } else {
      const char* form = c <= 0xFF ? "\\x%02x" : c <= 0xFFFF ? "\\u%04x" : "\\U%08x";
      std::snprintf(buf, sizeof buf, form, unsigned(c));
      out += buf;
    }
  }
  return out + quote;
}

}  // namespace kiln::data::jinja
