// Added and special tokens (tokenizer.json "added_tokens"): found in the
// text before pre-tokenization, as Hugging Face does, so "<|endoftext|>" in
// the input is one token and never split into pieces.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::data {

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false;
  bool normalized = false;   // matched in the normalized text (else in the raw input)
  bool lstrip = false;       // the match takes the whitespace before it
  bool rstrip = false;       // ... and after it
  bool single_word = false;  // only matched where it is not inside a word
};

// One piece of text after splitting on added tokens: either an added token
// (id >= 0) or text to tokenize further (id < 0).
struct Segment {
  std::string_view text;
  int32_t id;
};

// Finds a set of added tokens in text: leftmost, then longest match.
class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens);

  bool empty() const { return tokens_.empty(); }
  // Appends the segments of `text`: added tokens and the text between them.
  void split(std::string_view text, std::vector<Segment>& out) const;

 private:
  // A byte trie over the token contents; node 0 is the root.
  struct Node {
    int32_t token = -1;  // index into tokens_ of a token ending here
    std::vector<std::pair<unsigned char, int32_t>> next;
  };
  // The token whose content matches longest at text[pos], or -1; `len` gets its length.
  int32_t longest_at(std::string_view text, size_t pos, size_t& len) const;

  std::vector<AddedToken> tokens_;
  std::vector<Node> trie_;
  bool first_byte_[256] = {};
};

}  // namespace kiln::data
