// A byte-level BPE model: a vocabulary and ranked merges, run on the raw
// bytes of one pre-token. Merging follows Hugging Face's algorithm exactly
// (lowest rank first, leftmost on ties), and results are cached per
// pre-token since prose repeats the same words.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kiln::data {

// Transparent hashing lets maps keyed by std::string be probed with a
// string_view without building a string.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
template <class V>
using StringMap = std::unordered_map<std::string, V, StringHash, std::equal_to<>>;

class BpeModel {
 public:
  struct Options {
    bool ignore_merges = false;           // a pre-token found whole in the vocab is one token
    std::optional<std::string> unk_token;  // stands for a byte the vocab lacks
    bool fuse_unk = false;                 // consecutive unknown bytes become one unk
  };

  // vocab: (byte-level spelling, id); merges in rank order as pairs of
  // spellings. Throws kiln::Error naming the entry when they disagree.
  BpeModel(const std::vector<std::pair<std::string, int32_t>>& vocab,
           const std::vector<std::pair<std::string, std::string>>& merges, Options options);

  // Appends the ids of one pre-token, given as raw bytes.
  void encode(std::string_view word, std::vector<int32_t>& out) const;

  // Byte-level spelling -> id, for every entry of the vocab.
  const StringMap<int32_t>& vocab() const { return by_spelling_; }

 private:
  struct Merge {
    uint32_t rank;
    int32_t id;
  };
  // Open-addressing map from an id pair to its merge; the inner loop of BPE.
  struct MergeTable {
    std::vector<uint64_t> keys;  // (left << 32 | right) + 1, 0 = empty
    std::vector<Merge> values;
    uint64_t mask = 0;
    void reserve(size_t n);
    void put(int32_t a, int32_t b, Merge m);
    const Merge* find(int32_t a, int32_t b) const;
  };

  void merge_word(std::string_view word, std::vector<int32_t>& out) const;

  Options options_;
  StringMap<int32_t> by_spelling_;
  StringMap<int32_t> by_bytes_;  // raw bytes -> id for spellings in the byte alphabet
  int32_t byte_id_[256];         // -1: byte not in vocab
  std::optional<int32_t> unk_id_;
  MergeTable merges_;

  // Pre-token -> ids, shared by the threads encoding with one model; in
  // shards picked by hash, so threads rarely touch the same lock.
  struct CacheShard {
    static constexpr size_t kMaxEntries = 1 << 14;
    std::shared_mutex mutex;
    StringMap<std::vector<int32_t>> map;
  };
  static constexpr size_t kCacheShards = 16;
  static constexpr size_t kCacheMaxWordBytes = 64;
  std::unique_ptr<CacheShard[]> cache_ = std::make_unique<CacheShard[]>(kCacheShards);
};

}  // namespace kiln::data
