// A tokenizer's fingerprint: a hash of everything that decides how it
// encodes (normalizers, pre-tokenizer, the vocabulary by id, merges in rank
// order, BPE options, added tokens and their flags), whatever file form it
// was read from. Shards record the fingerprint of the tokenizer that made
// them, so training with another one is refused.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "kiln/data/tokenizer.h"

namespace kiln::data {

uint64_t fingerprint_of(const TokenizerSpec& spec);
// 16 lowercase hex digits, and back (nullopt for anything else).
std::string fingerprint_text(uint64_t fingerprint);
std::optional<uint64_t> parse_fingerprint(const std::string& text);

}  // namespace kiln::data
