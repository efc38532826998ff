#include "kiln/data/added_tokens.h"

#include <algorithm>

#include "kiln/data/unicode.h"
#include "kiln/data/utf8.h"

namespace kiln::data {

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  trie_.emplace_back();
  for (size_t t = 0; t < tokens_.size(); ++t) {
    const std::string& s = tokens_[t].content;
    if (s.empty()) continue;
    first_byte_[static_cast<unsigned char>(s[0])] = true;
    int32_t node = 0;
    for (char ch : s) {
      unsigned char b = static_cast<unsigned char>(ch);
      auto& next = trie_[node].next;
      auto it = std::find_if(next.begin(), next.end(), [&](const auto& e) { return e.first == b; });
      if (it != next.end()) {
        node = it->second;
      } else {
        int32_t child = int32_t(trie_.size());
        trie_[node].next.emplace_back(b, child);
        trie_.emplace_back();
        node = child;
      }
    }
    if (trie_[node].token < 0) trie_[node].token = int32_t(t);  // a repeated content keeps the first
  }
}

int32_t AddedTokenMatcher::longest_at(std::string_view text, size_t pos, size_t& len) const {
  int32_t node = 0, best = -1;
  for (size_t i = pos; i < text.size(); ++i) {
    unsigned char b = static_cast<unsigned char>(text[i]);
    const auto& next = trie_[node].next;
    auto it = std::find_if(next.begin(), next.end(), [&](const auto& e) { return e.first == b; });
    if (it == next.end()) break;
    node = it->second;
    if (trie_[node].token >= 0) best = trie_[node].token, len = i + 1 - pos;
  }
  return best;
}

namespace {

bool is_whitespace_at(std::string_view s, size_t i, int& len) {
  return is_space(char_class(decode_utf8(s, i, len)));
}

// Rust's char::is_alphanumeric (Alphabetic or Numeric) approximated by the
// letter and number classes, plus '_': what counts as inside a word.
bool is_word_char(char32_t c) {
  CharClass k = char_class(c);
  return k == CharClass::letter || k == CharClass::number || c == '_';
}

size_t previous_char(std::string_view s, size_t i) {
  do --i;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80);
  return i;
}

}  // namespace

void AddedTokenMatcher::split(std::string_view text, std::vector<Segment>& out) const {
  size_t done = 0;  // text before this is already in `out`
  size_t pos = 0;
  int len;
  while (pos < text.size()) {
    if (!first_byte_[static_cast<unsigned char>(text[pos])]) {
      ++pos;
      continue;
    }
    size_t match_len = 0;
    int32_t t = longest_at(text, pos, match_len);
    if (t < 0) {
      ++pos;
      continue;
    }
    const AddedToken& tok = tokens_[t];
    size_t start = pos, stop = pos + match_len;
    pos = stop;  // the scan resumes after the match even if it is rejected below
    if (tok.single_word) {
      bool word_before = start > 0 && is_word_char(decode_utf8(text, previous_char(text, start), len));
      bool word_after = stop < text.size() && is_word_char(decode_utf8(text, stop, len));
      if (word_before || word_after) continue;
    }
    if (tok.lstrip)
      while (start > done) {
        size_t p = previous_char(text, start);
        if (!is_whitespace_at(text, p, len)) break;
        start = p;
      }
    if (tok.rstrip)
      while (stop < text.size() && is_whitespace_at(text, stop, len)) stop += len;
    if (start > done) out.push_back({text.substr(done, start - done), -1});
    out.push_back({text.substr(start, stop - start), tok.id});
    done = stop;
    pos = std::max(pos, stop);
  }
  if (done < text.size()) out.push_back({text.substr(done), -1});
}

}  // namespace kiln::data
