// TokenCorpus: a list of documents, each a run of token ids, over shared
// token storage (an owned vector or a memory-mapped shard). Subsets (the
// training / validation split) share the storage instead of copying it.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace kiln::data {

// A block of tokens stored as u16 or u32 (shards pick the narrower type
// when the vocabulary fits); `owner` keeps the memory alive.
struct TokenBlock {
  std::shared_ptr<const void> owner;
  const void* data = nullptr;
  int elem_bytes = 4;  // 2 or 4
  int64_t size = 0;    // tokens
  // Per token, 1 where it is a training target (a chat's assistant tokens);
  // null: every token is. Kept alive by `owner` too.
  const uint8_t* trained = nullptr;
  int32_t at(int64_t i) const {
    return elem_bytes == 2 ? int32_t(static_cast<const uint16_t*>(data)[i])
                           : int32_t(static_cast<const uint32_t*>(data)[i]);
  }
};

class TokenCorpus {
 public:
  TokenCorpus() = default;

  // Documents [offsets[i], offsets[i+1]) of `tokens` (offsets start at 0
  // and end at tokens.size()).
  static TokenCorpus from_tokens(std::vector<int32_t> tokens, std::vector<uint64_t> offsets);
  static TokenCorpus from_documents(const std::vector<std::vector<int32_t>>& docs);
  // Documents with a training-target mask each (masks[i] as long as docs[i]).
  static TokenCorpus from_documents(const std::vector<std::vector<int32_t>>& docs,
                                    const std::vector<std::vector<uint8_t>>& masks);

  // Appends every document [offsets[i], offsets[i+1]) of `block`.
  void add_block(TokenBlock block, std::span<const uint64_t> offsets);
  // Appends all of `other`'s documents (sharing its storage).
  void append(const TokenCorpus& other);
  // The documents `docs` (indices into this corpus, in that order).
  TokenCorpus subset(std::span<const int64_t> docs) const;

  int64_t num_documents() const { return int64_t(docs_.size()); }
  int64_t num_tokens() const { return num_tokens_; }
  int64_t document_length(int64_t doc) const { return docs_[size_t(doc)].length; }
  // Copies tokens [begin, begin + count) of document `doc` into `out`.
  void read(int64_t doc, int64_t begin, int64_t count, int64_t* out) const;
  // Whether those tokens are training targets (1) or not (0).
  void read_trained(int64_t doc, int64_t begin, int64_t count, uint8_t* out) const;
  std::vector<int32_t> document(int64_t doc) const;
  // The largest token id (-1 when empty).
  int32_t max_token() const;

 private:
  struct Doc {
    int32_t block;
    int64_t begin, length;
  };
  std::vector<TokenBlock> blocks_;
  std::vector<Doc> docs_;
  int64_t num_tokens_ = 0;
};

}  // namespace kiln::data
