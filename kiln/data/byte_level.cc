#include "kiln/data/byte_level.h"

#include <array>

#include "kiln/data/utf8.h"

namespace kiln::data {
namespace {

// Printable bytes spell themselves; the others (control, space, 0x7F-0xA0,
// 0xAD) take code points from U+0100 upwards in byte order.
struct Tables {
  std::array<char32_t, 256> to_char{};
  std::array<int, 0x144> to_byte{};  // code point -> byte, -1 outside the alphabet
  Tables() {
    to_byte.fill(-1);
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_char[b] = printable ? char32_t(b) : next++;
      to_byte[to_char[b]] = b;
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

std::string byte_level_encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char b : bytes) append_utf8(out, tables().to_char[static_cast<unsigned char>(b)]);
  return out;
}

std::optional<std::string> byte_level_decode(std::string_view token) {
  std::string out;
  out.reserve(token.size());
  for (size_t i = 0; i < token.size();) {
    int len;
    char32_t c = decode_utf8(token, i, len);
    if (c >= tables().to_byte.size() || tables().to_byte[c] < 0) return std::nullopt;
    out += char(tables().to_byte[c]);
    i += len;
  }
  return out;
}

}  // namespace kiln::data
