// kiln's tokenizer: byte-level BPE as Hugging Face `tokenizers` runs it,
// loaded from a tokenizer.json or a GPT-2 vocab.json + merges.txt pair.
// encode(text) gives the ids HF's encode(text, add_special_tokens=False)
// gives: added/special tokens are found in the text first, the rest is
// normalized, pre-tokenized (regex split), and BPE-merged. Post-processors
// (BOS/EOS templates) are not applied: the data pipeline adds those.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/data/added_tokens.h"
#include "kiln/data/bpe.h"
#include "kiln/data/pretokenize.h"
#include "kiln/data/unicode.h"

namespace kiln {

// One pre-tokenizer step: a regex split of every piece, or (ByteLevel's
// add_prefix_space) a space put before every piece that lacks one.
struct PreTokenizeStep {
  enum Kind { split, prefix_space } kind;
  data::SplitPattern pattern = data::SplitPattern::gpt2;
};

// Everything a tokenizer is made of, as read from its files.
struct TokenizerSpec {
  std::vector<data::NormalForm> normalizers;  // applied in order (a Sequence)
  std::vector<PreTokenizeStep> pre_tokenizer;  // applied in order
  std::vector<std::pair<std::string, int32_t>> vocab;               // byte-level spelling, id
  std::vector<std::pair<std::string, std::string>> merges;          // in rank order
  data::BpeModel::Options bpe;
  std::vector<data::AddedToken> added_tokens;
  // The post-processor's single-sequence template (TemplateProcessing):
  // the ids it puts before and after a text's tokens.
  std::vector<int32_t> prefix_ids, suffix_ids;
};

// Whether folder `dir` holds a tokenizer Tokenizer::load reads: a
// tokenizer.json, or GPT-2's vocab.json and merges.txt.
bool folder_has_tokenizer(const std::string& dir);

class Tokenizer {
 public:
  // tokenizer.json; a directory holding tokenizer.json or vocab.json +
  // merges.txt; or a vocab.json with merges.txt beside it.
  static Tokenizer load(const std::string& path);
  // A Hugging Face tokenizer.json file, or its text (`origin` names it in errors).
  static Tokenizer from_json_file(const std::string& path);
  static Tokenizer from_json_text(std::string_view json, const std::string& origin);
  // GPT-2's vocab.json and merges.txt (GPT-2 regex, byte-level, no
  // normalizer); "<|endoftext|>" is a special token when the vocab has it.
  static Tokenizer from_gpt2_files(const std::string& vocab_json, const std::string& merges_txt);

  explicit Tokenizer(TokenizerSpec spec);

  // Throws kiln::Error if `text` is not valid UTF-8.
  std::vector<int32_t> encode(std::string_view text) const;
  void encode(std::string_view text, std::vector<int32_t>& out) const;
  // HF's encode(text) (add_special_tokens=True): encode(text) inside the
  // post-processor's template, e.g. Llama 3's <|begin_of_text|> first.
  std::vector<int32_t> encode_with_special_tokens(std::string_view text) const;

  // The text of `ids`; byte sequences that are not valid UTF-8 become
  // U+FFFD, as in HF. Throws kiln::Error on an id outside the vocab.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  // One past the largest id.
  int32_t vocab_size() const { return int32_t(tokens_.size()); }
  std::optional<int32_t> token_to_id(std::string_view token) const;
  // The token's spelling (byte-level for BPE tokens, content for added ones).
  const std::string& id_to_token(int32_t id) const;
  bool is_special(int32_t id) const;
  // Whether `id` is a token (ids in [0, vocab_size) may be unused).
  bool has_id(int32_t id) const { return id >= 0 && id < vocab_size() && kind_[size_t(id)] != 0; }
  // data/tokenizer_fingerprint.h: equal for tokenizers that encode alike.
  uint64_t fingerprint() const { return fingerprint_; }

 private:
  void encode_text(std::string_view text, std::vector<int32_t>& out) const;
  void encode_normalized(std::string_view text, std::vector<int32_t>& out) const;

  uint64_t fingerprint_;  // first: computed while the spec is whole
  std::vector<data::NormalForm> normalizers_;
  std::vector<PreTokenizeStep> pre_tokenizer_;
  data::BpeModel model_;
  data::AddedTokenMatcher raw_added_;         // matched before normalization
  data::AddedTokenMatcher normalized_added_;  // matched after it
  // Per id: spelling, decoded bytes, flags.
  std::vector<std::string> tokens_;
  std::vector<std::string> bytes_;
  std::vector<uint8_t> kind_;  // 0 unused id, 1 model token, 2 added, 3 special
  data::StringMap<int32_t> added_by_content_;
  std::vector<int32_t> prefix_ids_, suffix_ids_;
};

// The document-start token of Llama-style vocabularies (<|begin_of_text|>,
// <s>), if the tokenizer has one.
std::optional<int32_t> bos_token_id(const Tokenizer& tokenizer);
// The end-of-text token (<|end_of_text|>, <|endoftext|>, </s>), if any.
std::optional<int32_t> eos_token_id(const Tokenizer& tokenizer);

}  // namespace kiln
