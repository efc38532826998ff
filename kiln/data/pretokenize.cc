#include "kiln/data/pretokenize.h"

#include "kiln/data/unicode.h"
#include "kiln/data/utf8.h"

namespace kiln::data {
namespace {

constexpr std::string_view kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// The code point at a byte offset, with its class; past the end, a
// sentinel of class `other` and length 0 that no loop consumes.
struct Char {
  char32_t c;
  int len;
  CharClass k;
};

struct Text {
  std::string_view s;
  Char at(size_t i) const {
    if (i >= s.size()) return {0, 0, CharClass::other};
    int len;
    char32_t c = decode_utf8(s, i, len);
    return {c, len, char_class(c)};
  }
  // End of the run of characters of class k starting at i.
  size_t skip(size_t i, CharClass k) const {
    for (Char c = at(i); c.len && c.k == k; c = at(i)) i += c.len;
    return i;
  }
};

// Length of a contraction after an apostrophe at s[i]: 's 't 're 've 'm 'll
// 'd, any case when `fold` (under Unicode case folding U+017F long s is s).
size_t contraction(const Text& t, size_t i, bool fold) {
  auto is = [&](size_t k, char lower) {
    if (i + k >= t.s.size()) return false;
    char c = t.s[i + k];
    return c == lower || (fold && c == lower - 'a' + 'A');
  };
  if (is(0, 's') || is(0, 't') || is(0, 'm') || is(0, 'd')) return 1;
  if (fold && t.s.substr(i, 2) == "\xC5\xBF") return 2;  // ſ
  if ((is(0, 'r') || is(0, 'v')) && is(1, 'e')) return 2;
  if (is(0, 'l') && is(1, 'l')) return 2;
  return 0;
}

// The tail shared by all patterns at a whitespace character:
// \s+(?!\S)|\s+ , i.e. a run of whitespace that leaves its last character
// to the next piece when one follows.
size_t whitespace_run(const Text& t, size_t pos) {
  size_t i = pos, last = pos;
  for (Char c = t.at(i); c.len && is_space(c.k); c = t.at(i)) last = i, i += c.len;
  if (i == t.s.size() || last == pos) return i;
  return last;
}

size_t match_gpt2(const Text& t, size_t pos) {
  if (t.s[pos] == '\'')
    if (size_t n = contraction(t, pos + 1, false)) return pos + 1 + n;
  size_t p = pos + (t.s[pos] == ' ');
  Char c = t.at(p);
  if (c.len && (c.k == CharClass::letter || c.k == CharClass::number || c.k == CharClass::other))
    return t.skip(p, c.k);
  return whitespace_run(t, pos);
}

size_t match_llama(const Text& t, size_t pos, int max_digits) {
  Char c = t.at(pos);
  // (?i:'s|'t|'re|'ve|'m|'ll|'d)
  if (c.c == '\'')
    if (size_t n = contraction(t, pos + 1, true)) return pos + 1 + n;
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (c.k == CharClass::letter) return t.skip(pos, CharClass::letter);
  if ((c.k == CharClass::other || c.k == CharClass::space) && t.at(pos + c.len).k == CharClass::letter)
    return t.skip(pos + c.len, CharClass::letter);
  // \p{N}{1,3} or \p{N}
  if (c.k == CharClass::number) {
    size_t i = pos;
    for (int n = 0; n < max_digits; ++n) {
      Char d = t.at(i);
      if (!d.len || d.k != CharClass::number) break;
      i += d.len;
    }
    return i;
  }
  // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
  size_t p = pos + (c.c == ' ');
  if (t.at(p).len && t.at(p).k == CharClass::other) {
    p = t.skip(p, CharClass::other);
    while (p < t.s.size() && (t.s[p] == '\r' || t.s[p] == '\n')) ++p;
    return p;
  }
  // \s*[\r\n]+ : up to the last newline of the whitespace run
  size_t i = pos, after_newline = 0;
  for (Char w = t.at(i); w.len && is_space(w.k); w = t.at(i)) {
    i += w.len;
    if (w.k == CharClass::newline) after_newline = i;
  }
  if (after_newline) return after_newline;
  return whitespace_run(t, pos);
}

}  // namespace

std::optional<SplitPattern> find_split_pattern(std::string_view regex) {
  for (SplitPattern p : {SplitPattern::gpt2, SplitPattern::llama3, SplitPattern::qwen2})
    if (regex == split_regex(p)) return p;
  return std::nullopt;
}

std::string_view split_regex(SplitPattern p) {
  switch (p) {
    case SplitPattern::gpt2: return kGpt2;
    case SplitPattern::llama3: return kLlama3;
    case SplitPattern::qwen2: return kQwen2;
  }
  return {};
}

void split(SplitPattern p, std::string_view text, std::vector<std::string_view>& out) {
  Text t{text};
  for (size_t pos = 0; pos < text.size();) {
    size_t end = p == SplitPattern::gpt2     ? match_gpt2(t, pos)
                 : p == SplitPattern::llama3 ? match_llama(t, pos, 3)
                                             : match_llama(t, pos, 1);
    out.push_back(text.substr(pos, end - pos));
    pos = end;
  }
}

}  // namespace kiln::data
