// The Unicode facts the tokenizer needs, from ICU: the character classes of
// the pre-tokenizer regexes (\p{L}, \p{N}, \s) and normalization forms.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace kiln::data {

// \p{L} is `letter`, \p{N} is `number`, \s is `space` or `newline` (the
// White_Space property, as Oniguruma reads \s); `newline` is \r and \n,
// which some patterns treat apart.
enum class CharClass : uint8_t { letter, number, space, newline, other };

CharClass char_class_slow(char32_t c);

inline CharClass char_class(char32_t c) {
  // ASCII is most text: a table built once answers it without ICU.
  struct Ascii {
    CharClass k[128];
    Ascii() {
      for (char32_t i = 0; i < 128; ++i) k[i] = char_class_slow(i);
    }
  };
  static const Ascii ascii;
  return c < 128 ? ascii.k[c] : char_class_slow(c);
}

inline bool is_space(CharClass k) { return k == CharClass::space || k == CharClass::newline; }

enum class NormalForm : uint8_t { nfc, nfd, nfkc, nfkd };

// `text` (valid UTF-8) in the given normalization form.
std::string normalize(std::string_view text, NormalForm form);

}  // namespace kiln::data
