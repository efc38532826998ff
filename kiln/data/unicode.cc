#include "kiln/data/unicode.h"

#include <algorithm>
#include <iterator>

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>

#include "kiln/base/error.h"
#include "kiln/data/utf8.h"

namespace kiln::data {

namespace {

// Letters and numbers assigned in Unicode 15.1 and 16.0, which Hugging Face's
// regex engine knows and Debian 12's ICU 72 (Unicode 15.0) does not. Found
// by classifying every code point with both; a newer ICU agrees with it.
struct Range {
  char32_t first, last;
  CharClass k;
};
constexpr CharClass L = CharClass::letter, N = CharClass::number;
constexpr Range kNewerThanIcu72[] = {
    {0x1C89, 0x1C8A, L},   {0xA7CB, 0xA7CD, L},   {0xA7DA, 0xA7DC, L},   {0x105C0, 0x105F3, L},
    {0x10D40, 0x10D49, N}, {0x10D4A, 0x10D65, L}, {0x10D6F, 0x10D85, L}, {0x10EC2, 0x10EC4, L},
    {0x11380, 0x11389, L}, {0x1138B, 0x1138B, L}, {0x1138E, 0x1138E, L}, {0x11390, 0x113B5, L},
    {0x113B7, 0x113B7, L}, {0x113D1, 0x113D1, L}, {0x113D3, 0x113D3, L}, {0x116D0, 0x116E3, N},
    {0x11BC0, 0x11BE0, L}, {0x11BF0, 0x11BF9, N}, {0x13460, 0x143FA, L}, {0x16100, 0x1611D, L},
    {0x16130, 0x16139, N}, {0x16D40, 0x16D6C, L}, {0x16D70, 0x16D79, N}, {0x18CFF, 0x18CFF, L},
    {0x1CCF0, 0x1CCF9, N}, {0x1E5D0, 0x1E5ED, L}, {0x1E5F0, 0x1E5F0, L}, {0x1E5F1, 0x1E5FA, N},
    {0x2EBF0, 0x2EE5D, L},
};

// Combining marks (new since Unicode 11) that Hugging Face's normalizers
// treat as having canonical combining class 0, so marks are never reordered
// or composed across them; found by normalizing probes around every mark
// with both. kiln normalizes the text between them apart to agree. (The one
// other difference found: HF does not compose U+11935 U+11930 into U+11938.)
constexpr char32_t kHfStarters[] = {
    0x7FD, 0x898, 0x899, 0x89A, 0x89B, 0x89C, 0x89D, 0x89E, 0x89F, 0x8CA, 0x8CB, 0x8CC, 0x8CD,
    0x8CE, 0x8CF, 0x8D0, 0x8D1, 0x8D2, 0x8D3, 0x9FE, 0xC3C, 0xD3B, 0xD3C, 0xEBA, 0x1715, 0x1ABF,
    0x1AC0, 0x1AC1, 0x1AC2, 0x1AC3, 0x1AC4, 0x1AC5, 0x1AC6, 0x1AC7, 0x1AC8, 0x1AC9, 0x1ACA, 0x1ACB,
    0x1ACC, 0x1ACD, 0x1ACE, 0x1DF6, 0x1DF7, 0x1DF8, 0x1DF9, 0x1DFA, 0xA82C, 0x10D24, 0x10D25,
    0x10D26, 0x10D27, 0x10EAB, 0x10EAC, 0x10EFD, 0x10EFE, 0x10EFF, 0x10F46, 0x10F47, 0x10F48,
    0x10F49, 0x10F4A, 0x10F4B, 0x10F4C, 0x10F4D, 0x10F4E, 0x10F4F, 0x10F50, 0x10F82, 0x10F83,
    0x10F84, 0x10F85, 0x11070, 0x1133B, 0x1145E, 0x11839, 0x1183A, 0x1193D, 0x1193E, 0x11943,
    0x119E0, 0x11A34, 0x11A47, 0x11A99, 0x11D42, 0x11D44, 0x11D45, 0x11D97, 0x11F41, 0x11F42,
    0x16FF0, 0x16FF1, 0x1E08F, 0x1E130, 0x1E131, 0x1E132, 0x1E133, 0x1E134, 0x1E135, 0x1E136,
    0x1E2AE, 0x1E2EC, 0x1E2ED, 0x1E2EE, 0x1E2EF, 0x1E4EC, 0x1E4ED, 0x1E4EE, 0x1E4EF,
};

bool is_hf_starter(char32_t c) {
  return c >= kHfStarters[0] && std::binary_search(std::begin(kHfStarters), std::end(kHfStarters), c);
}

void normalize_icu(const icu::Normalizer2& n, std::string_view text, std::string& out) {
  KILN_CHECK(text.size() < size_t(INT32_MAX), "tokenizer: a text segment of ", text.size(),
             " bytes is too long to normalize (split it)");
  UErrorCode err = U_ZERO_ERROR;
  icu::StringPiece in(text.data(), int32_t(text.size()));
  if (n.isNormalizedUTF8(in, err) && U_SUCCESS(err)) return out.append(text), void();
  err = U_ZERO_ERROR;
  icu::StringByteSink<std::string> sink(&out, int32_t(text.size()));
  n.normalizeUTF8(0, in, sink, nullptr, err);
  KILN_CHECK(U_SUCCESS(err), "tokenizer: Unicode normalization failed: ", u_errorName(err));
}

}  // namespace

CharClass char_class_slow(char32_t c) {
  if (c == '\r' || c == '\n') return CharClass::newline;
  if (u_isUWhiteSpace(UChar32(c))) return CharClass::space;
  if (u_charType(UChar32(c)) == U_UNASSIGNED)
    for (const Range& r : kNewerThanIcu72)
      if (c >= r.first && c <= r.last) return r.k;
  uint32_t gc = U_GET_GC_MASK(UChar32(c));
  if (gc & U_GC_L_MASK) return CharClass::letter;
  if (gc & U_GC_N_MASK) return CharClass::number;
  return CharClass::other;
}

std::string normalize(std::string_view text, NormalForm form) {
  bool ascii = true;
  for (char ch : text) ascii &= static_cast<unsigned char>(ch) < 0x80;
  if (ascii) return std::string(text);  // ASCII is the same in every form
  UErrorCode err = U_ZERO_ERROR;
  const icu::Normalizer2* n = nullptr;
  switch (form) {
    case NormalForm::nfc: n = icu::Normalizer2::getNFCInstance(err); break;
    case NormalForm::nfd: n = icu::Normalizer2::getNFDInstance(err); break;
    case NormalForm::nfkc: n = icu::Normalizer2::getNFKCInstance(err); break;
    case NormalForm::nfkd: n = icu::Normalizer2::getNFKDInstance(err); break;
  }
  KILN_CHECK(U_SUCCESS(err), "tokenizer: ICU normalizer unavailable: ", u_errorName(err));
  std::string out;
  size_t start = 0;
  for (size_t i = 0; i < text.size();) {
    int len;
    char32_t c = decode_utf8(text, i, len);
    if (is_hf_starter(c)) {
      normalize_icu(*n, text.substr(start, i - start), out);
      out.append(text.substr(i, len));
      start = i + len;
    }
    i += len;
  }
  normalize_icu(*n, text.substr(start), out);
  return out;
}

}  // namespace kiln::data
