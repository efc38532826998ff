// Learning a byte-level BPE from text, written as a Hugging Face
// tokenizer.json: Llama-3-style regex pre-tokenization, the 256 bytes as
// the base alphabet, then the most frequent adjacent pair merged until the
// vocabulary is full. The file loads in HF `tokenizers` and in kiln alike.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/data/added_tokens.h"
#include "kiln/data/bpe.h"
#include "kiln/data/pretokenize.h"

namespace kiln {

struct BpeTrainerOptions {
  int64_t vocab_size = 32000;               // special tokens + 256 bytes + merged tokens
  std::vector<std::string> special_tokens;  // get ids 0, 1, ...; never split or merged
  int64_t min_frequency = 2;                // a pair seen fewer times is not merged
  data::SplitPattern pattern = data::SplitPattern::llama3;
};

class BpeTrainer {
 public:
  explicit BpeTrainer(BpeTrainerOptions options);

  // Counts the pre-tokens of `text` (UTF-8; `origin` names it in errors).
  void add_text(std::string_view text, const std::string& origin = "text");
  // Reads a file in pieces and counts it; throws kiln::Error naming it.
  void add_file(const std::string& path);

  struct Result {
    std::string json;  // the tokenizer.json text
    int64_t vocab_size = 0;
    int64_t merges = 0;
  };
  // Learns the merges from everything counted so far.
  Result train() const;

 private:
  void count(std::string_view text);  // `text` is valid UTF-8

  BpeTrainerOptions options_;
  data::AddedTokenMatcher specials_;
  data::StringMap<int64_t> word_counts_;  // pre-token bytes -> occurrences
};

}  // namespace kiln
