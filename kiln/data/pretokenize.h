// The Split regexes of the byte-level BPE tokenizers kiln reads, as
// hand-written matchers over code points: std::regex has no Unicode classes,
// and a matcher per pattern is exact and fast. A tokenizer.json whose
// pattern is not one of these is refused with the pattern in the message.
#pragma once
#include <optional>
#include <string_view>
#include <vector>

namespace kiln::data {

enum class SplitPattern {
  gpt2,    // GPT-2 / the ByteLevel pre-tokenizer's own regex
  llama3,  // Llama 3 (tiktoken cl100k style): numbers in groups of up to 3
  qwen2,   // Qwen2 / Qwen3: the Llama 3 pattern with single digits
};

// The pattern a tokenizer.json regex names, or nullopt if kiln has no matcher.
std::optional<SplitPattern> find_split_pattern(std::string_view regex);

// The regex text of a pattern, as tokenizer.json files spell it.
std::string_view split_regex(SplitPattern p);

// Appends the pieces of `text` (valid UTF-8) to `out`: the regex matches in
// order, as the "Isolated" split behaviour keeps them. They cover the text.
void split(SplitPattern p, std::string_view text, std::vector<std::string_view>& out);

}  // namespace kiln::data
