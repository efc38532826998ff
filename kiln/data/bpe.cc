#include "kiln/data/bpe.h"

#include <algorithm>
#include <mutex>

#include "kiln/base/error.h"
#include "kiln/data/byte_level.h"

namespace kiln::data {

void BpeModel::MergeTable::reserve(size_t n) {
  size_t cap = 16;
  while (cap < 2 * n) cap *= 2;
  keys.assign(cap, 0);
  values.assign(cap, {});
  mask = cap - 1;
}

namespace {
inline uint64_t pair_key(int32_t a, int32_t b) { return ((uint64_t(uint32_t(a)) << 32) | uint32_t(b)) + 1; }
inline uint64_t slot_of(uint64_t key) {
  uint64_t h = key * 0x9E3779B97F4A7C15ull;
  return h ^ (h >> 31);
}
}  // namespace

void BpeModel::MergeTable::put(int32_t a, int32_t b, Merge m) {
  uint64_t key = pair_key(a, b);
  for (uint64_t i = slot_of(key) & mask;; i = (i + 1) & mask) {
    if (keys[i] == 0 || keys[i] == key) {  // a repeated pair keeps the later rank, as Hugging Face does
      keys[i] = key;
      values[i] = m;
      return;
    }
  }
}

const BpeModel::Merge* BpeModel::MergeTable::find(int32_t a, int32_t b) const {
  uint64_t key = pair_key(a, b);
  for (uint64_t i = slot_of(key) & mask;; i = (i + 1) & mask) {
    if (keys[i] == key) return &values[i];
    if (keys[i] == 0) return nullptr;
  }
}

BpeModel::BpeModel(const std::vector<std::pair<std::string, int32_t>>& vocab,
                   const std::vector<std::pair<std::string, std::string>>& merges, Options options)
    : options_(std::move(options)) {
  by_spelling_.reserve(vocab.size());
  for (const auto& [spelling, id] : vocab) {
    KILN_CHECK(id >= 0, "vocab entry '", spelling, "' has negative id ", id);
    by_spelling_[spelling] = id;
    if (auto bytes = byte_level_decode(spelling)) by_bytes_[*bytes] = id;
  }
  for (int b = 0; b < 256; ++b) {
    auto it = by_spelling_.find(byte_level_encode(std::string(1, char(b))));
    byte_id_[b] = it == by_spelling_.end() ? -1 : it->second;
  }
  if (options_.unk_token) {
    auto it = by_spelling_.find(*options_.unk_token);
    KILN_CHECK(it != by_spelling_.end(), "unk_token '", *options_.unk_token, "' is not in the vocab");
    unk_id_ = it->second;
  }
  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    auto id_of = [&](const std::string& s) {
      auto it = by_spelling_.find(s);
      KILN_CHECK(it != by_spelling_.end(), "merge ", rank, " ('", a, "', '", b, "'): '", s,
                 "' is not in the vocab");
      return it->second;
    };
    int32_t left = id_of(a), right = id_of(b), merged = id_of(a + b);
    merges_.put(left, right, {uint32_t(rank), merged});
  }
}

void BpeModel::merge_word(std::string_view word, std::vector<int32_t>& out) const {
  struct Symbol {
    int32_t id, prev, next;
    bool alive;
  };
  std::vector<Symbol> syms;
  syms.reserve(word.size());
  auto add = [&](int32_t id) {
    int32_t n = int32_t(syms.size());
    syms.push_back({id, n - 1, -1, true});
    if (n > 0) syms[n - 1].next = n;
  };
  bool pending_unk = false;  // an unknown byte (run, with fuse_unk) not yet added
  for (char ch : word) {
    int32_t id = byte_id_[static_cast<unsigned char>(ch)];
    if (id >= 0) {
      if (pending_unk) add(*unk_id_), pending_unk = false;
      add(id);
    } else if (unk_id_) {  // without an unk token the byte is dropped, as in Hugging Face
      if (pending_unk && !options_.fuse_unk) add(*unk_id_);
      pending_unk = true;
    }
  }
  if (pending_unk) add(*unk_id_);

  // Candidate merges by (rank, position); entries made stale by an earlier
  // merge are recognised when popped and skipped.
  struct Candidate {
    uint32_t rank;
    int32_t pos, id;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::vector<Candidate> heap;
  auto push = [&](int32_t pos) {
    if (const Merge* m = merges_.find(syms[pos].id, syms[syms[pos].next].id)) {
      heap.push_back({m->rank, pos, m->id});
      std::push_heap(heap.begin(), heap.end(), std::greater<>{});
    }
  };
  for (int32_t i = 0; i + 1 < int32_t(syms.size()); ++i) push(i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>{});
    Candidate top = heap.back();
    heap.pop_back();
    Symbol& s = syms[top.pos];
    if (!s.alive || s.next < 0) continue;
    Symbol& right = syms[s.next];
    const Merge* m = merges_.find(s.id, right.id);
    if (!m || m->id != top.id) continue;
    s.id = top.id;
    right.alive = false;
    s.next = right.next;
    if (s.next >= 0) syms[s.next].prev = top.pos;
    if (s.prev >= 0) push(s.prev);
    if (s.next >= 0) push(top.pos);
  }
  for (const Symbol& s : syms)
    if (s.alive) out.push_back(s.id);
}

void BpeModel::encode(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    auto it = by_bytes_.find(word);
    if (it != by_bytes_.end()) return out.push_back(it->second);
  }
  if (word.size() > kCacheMaxWordBytes) return merge_word(word, out);
  CacheShard& shard = cache_[StringHash{}(word) % kCacheShards];
  {
    std::shared_lock lock(shard.mutex);
    auto it = shard.map.find(word);
    if (it != shard.map.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  size_t start = out.size();
  merge_word(word, out);
  std::unique_lock lock(shard.mutex);
  if (shard.map.size() < CacheShard::kMaxEntries)
    shard.map.emplace(std::string(word), std::vector<int32_t>(out.begin() + start, out.end()));
}

}  // namespace kiln::data
