// UTF-8 for the tokenizer: text stays bytes in memory and code points are
// read on the fly, never converted to wide strings.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace kiln::data {

// The code point starting at s[i] and its length in bytes. `s` must be valid
// UTF-8 (check it first with find_invalid_utf8).
inline char32_t decode_utf8(std::string_view s, size_t i, int& len) {
  unsigned char b = static_cast<unsigned char>(s[i]);
  if (b < 0x80) return len = 1, b;
  auto cont = [&](size_t k) { return char32_t(static_cast<unsigned char>(s[i + k]) & 0x3F); };
  if (b < 0xE0) return len = 2, (char32_t(b & 0x1F) << 6) | cont(1);
  if (b < 0xF0) return len = 3, (char32_t(b & 0x0F) << 12) | (cont(1) << 6) | cont(2);
  return len = 4, (char32_t(b & 0x07) << 18) | (cont(1) << 12) | (cont(2) << 6) | cont(3);
}

void append_utf8(std::string& out, char32_t c);

// Byte offset of the first byte that does not start a well-formed UTF-8
// sequence (overlong forms, surrogates and values past U+10FFFF are
// ill-formed), or npos when all of `s` is valid.
size_t find_invalid_utf8(std::string_view s);

// `bytes` with each ill-formed sequence replaced by U+FFFD, one per maximal
// subpart as the Unicode standard recommends (what Rust's from_utf8_lossy
// and so Hugging Face's decoders do).
std::string to_valid_utf8(std::string_view bytes);

}  // namespace kiln::data
