// GPT-2's byte-level alphabet: every byte is spelled as one printable code
// point, so BPE vocabularies of arbitrary bytes can be stored as text. kiln
// runs BPE on raw bytes and uses this only to read and write vocab files.
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace kiln::data {

// `bytes` spelled in the byte-level alphabet (UTF-8).
std::string byte_level_encode(std::string_view bytes);

// The bytes a byte-level spelling stands for, or nullopt if `token` (valid
// UTF-8) has a code point outside the alphabet.
std::optional<std::string> byte_level_decode(std::string_view token);

}  // namespace kiln::data
