#include "kiln/data/bpe_trainer.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "kiln/base/error.h"
#include "kiln/data/byte_level.h"
#include "kiln/data/utf8.h"

namespace kiln {

using data::SplitPattern;

BpeTrainer::BpeTrainer(BpeTrainerOptions options) : options_(std::move(options)) {
  std::vector<data::AddedToken> specials;
  for (size_t i = 0; i < options_.special_tokens.size(); ++i) {
    const std::string& s = options_.special_tokens[i];
    KILN_CHECK(!s.empty(), "tokenizer train: a special token is empty");
    KILN_CHECK(data::find_invalid_utf8(s) == std::string::npos, "tokenizer train: special token '", s,
               "' is not valid UTF-8");
    for (size_t j = 0; j < i; ++j)
      KILN_CHECK(options_.special_tokens[j] != s, "tokenizer train: special token '", s, "' is given twice");
    specials.push_back({s, int32_t(i), true});
  }
  specials_ = data::AddedTokenMatcher(std::move(specials));
  int64_t base = 256 + int64_t(options_.special_tokens.size());
  KILN_CHECK(options_.vocab_size >= base, "tokenizer train: --vocab-size ", options_.vocab_size,
             " is below the ", base, " ids the bytes and special tokens take; give at least ", base);
  KILN_CHECK(options_.vocab_size <= INT32_MAX, "tokenizer train: --vocab-size ", options_.vocab_size, " is too large");
  KILN_CHECK(options_.min_frequency >= 1, "tokenizer train: min frequency must be at least 1");
}

void BpeTrainer::add_text(std::string_view text, const std::string& origin) {
  size_t bad = data::find_invalid_utf8(text);
  KILN_CHECK(bad == std::string_view::npos, origin, ": not valid UTF-8 at byte ", bad);
  count(text);
}

void BpeTrainer::count(std::string_view text) {
  std::vector<data::Segment> segments;
  if (specials_.empty()) segments.push_back({text, -1});
  else specials_.split(text, segments);
  std::vector<std::string_view> pieces;
  for (const data::Segment& s : segments) {
    if (s.id >= 0) continue;  // special tokens are not learned from
    pieces.clear();
    data::split(options_.pattern, s.text, pieces);
    for (std::string_view p : pieces) {
      auto it = word_counts_.find(p);
      if (it == word_counts_.end()) word_counts_.emplace(std::string(p), 1);
      else ++it->second;
    }
  }
}

void BpeTrainer::add_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  KILN_CHECK(f, path, ": cannot open: ", std::strerror(errno));
  // Pieces end after a newline followed by a non-space character: no
  // pre-token crosses such a point, so counts do not depend on the cuts.
  constexpr size_t kChunk = 8 << 20;
  std::string buf, carry;
  size_t offset = 0;  // of buf[0] in the file, for error messages
  while (true) {
    buf = std::move(carry);
    carry.clear();
    size_t have = buf.size();
    buf.resize(have + kChunk);
    f.read(buf.data() + have, std::streamsize(kChunk));
    buf.resize(have + size_t(f.gcount()));
    KILN_CHECK(!f.bad(), path, ": read failed");
    bool last = f.eof() || f.gcount() == 0;
    size_t cut = buf.size();
    if (!last) {
      cut = 0;
      for (size_t i = buf.size() - 1; i > 0; --i) {
        unsigned char next = static_cast<unsigned char>(buf[i]);
        if (buf[i - 1] == '\n' && next > ' ' && next < 0x80) {
          cut = i;
          break;
        }
      }
      if (cut == 0) {  // no such point in this piece: read on
        carry = std::move(buf);
        continue;
      }
      carry = buf.substr(cut);
    }
    std::string_view piece = std::string_view(buf).substr(0, cut);
    size_t bad = data::find_invalid_utf8(piece);
    KILN_CHECK(bad == std::string_view::npos, path, ": not valid UTF-8 at byte ", offset + bad);
    count(piece);
    offset += cut;
    if (last) break;
  }
}

namespace {

struct PairHash {
  size_t operator()(uint64_t k) const { return size_t(k * 0x9E3779B97F4A7C15ull >> 1); }
};
inline uint64_t key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }

struct Word {
  std::vector<int32_t> syms;
  int64_t count;
};

// Most frequent pair first; on equal counts the smaller (left, right) ids,
// so training is deterministic.
struct Candidate {
  int64_t count;
  uint64_t pair;
  bool operator<(const Candidate& o) const { return count != o.count ? count < o.count : pair > o.pair; }
};

// The tokenizer.json in the layout HF's own trainer writes. The vocab and
// merges are written by hand, one entry a line: nlohmann's ordered objects
// insert in linear time, and the file stays readable.
std::string tokenizer_json(const std::vector<std::string>& spellings, int32_t num_special,
                           const std::vector<std::pair<int32_t, int32_t>>& merges, SplitPattern pattern) {
  using json = nlohmann::ordered_json;
  json added = json::array();
  for (int32_t i = 0; i < num_special; ++i)
    added.push_back({{"id", i},
                     {"content", spellings[i]},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}};
  json split = {{"type", "Split"},
                {"pattern", {{"Regex", std::string(data::split_regex(pattern))}}},
                {"behavior", "Isolated"},
                {"invert", false}};
  json pre = {{"type", "Sequence"}, {"pretokenizers", json::array({split, byte_level})}};
  auto str = [](const std::string& s) { return json(s).dump(); };
  std::string out = "{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n";
  out += "  \"added_tokens\": " + added.dump() + ",\n  \"normalizer\": null,\n";
  out += "  \"pre_tokenizer\": " + pre.dump() + ",\n";
  out += "  \"post_processor\": " + byte_level.dump() + ",\n  \"decoder\": " + byte_level.dump() + ",\n";
  out += "  \"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": null, "
         "\"continuing_subword_prefix\": null, \"end_of_word_suffix\": null, \"fuse_unk\": false, "
         "\"byte_fallback\": false, \"ignore_merges\": false,\n    \"vocab\": {";
  for (size_t i = 0; i < spellings.size(); ++i)
    out += (i ? ",\n      " : "\n      ") + str(spellings[i]) + ": " + std::to_string(i);
  out += "\n    },\n    \"merges\": [";
  for (size_t i = 0; i < merges.size(); ++i)
    out += (i ? ",\n      [" : "\n      [") + str(spellings[merges[i].first]) + ", " + str(spellings[merges[i].second]) + "]";
  out += "\n    ]\n  }\n}\n";
  return out;
}

}  // namespace

BpeTrainer::Result BpeTrainer::train() const {
  KILN_CHECK(!word_counts_.empty(), "tokenizer train: the input has no text to learn from");
  const int32_t first_byte = int32_t(options_.special_tokens.size());
  std::vector<std::string> tokens(options_.special_tokens);  // id -> bytes
  for (int b = 0; b < 256; ++b) tokens.push_back(std::string(1, char(b)));
  data::StringMap<int32_t> id_of;
  for (int32_t i = first_byte; i < int32_t(tokens.size()); ++i) id_of[tokens[i]] = i;

  // Words in a fixed order (sorted) so that results do not depend on hashing.
  std::vector<const std::pair<const std::string, int64_t>*> sorted;
  for (const auto& wc : word_counts_) sorted.push_back(&wc);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->first < b->first; });
  std::vector<Word> words;
  words.reserve(sorted.size());
  for (auto* wc : sorted) {
    Word w{{}, wc->second};
    for (char c : wc->first) w.syms.push_back(first_byte + static_cast<unsigned char>(c));
    words.push_back(std::move(w));
  }

  std::unordered_map<uint64_t, int64_t, PairHash> counts;
  std::unordered_map<uint64_t, std::vector<int32_t>, PairHash> where;  // pair -> words (may repeat)
  auto add_pairs = [&](int32_t wi, int64_t sign) {
    const Word& w = words[wi];
    for (size_t i = 0; i + 1 < w.syms.size(); ++i) {
      uint64_t k = key(w.syms[i], w.syms[i + 1]);
      counts[k] += sign * w.count;
      if (sign > 0) where[k].push_back(wi);
    }
  };
  for (int32_t wi = 0; wi < int32_t(words.size()); ++wi) add_pairs(wi, +1);
  std::priority_queue<Candidate> queue;
  for (const auto& [k, c] : counts) queue.push({c, k});

  std::vector<std::pair<int32_t, int32_t>> merges;
  while (int64_t(tokens.size()) < options_.vocab_size && !queue.empty()) {
    Candidate top = queue.top();
    queue.pop();
    int64_t now = counts[top.pair];
    if (now != top.count) {  // stale: counts fell since it was queued
      if (now > 0) queue.push({now, top.pair});
      continue;
    }
    if (top.count < options_.min_frequency) break;
    int32_t a = int32_t(top.pair >> 32), b = int32_t(top.pair & 0xFFFFFFFF);
    std::string merged = tokens[a] + tokens[b];
    auto [it, fresh] = id_of.try_emplace(merged, int32_t(tokens.size()));
    if (fresh) tokens.push_back(merged);
    int32_t id = it->second;
    merges.emplace_back(a, b);

    std::vector<int32_t> affected = std::move(where[top.pair]);
    where.erase(top.pair);
    std::sort(affected.begin(), affected.end());
    affected.erase(std::unique(affected.begin(), affected.end()), affected.end());
    std::unordered_set<uint64_t> touched;
    for (int32_t wi : affected) {
      Word& w = words[wi];
      add_pairs(wi, -1);
      std::vector<int32_t> next;
      next.reserve(w.syms.size());
      for (size_t i = 0; i < w.syms.size(); ++i) {
        if (i + 1 < w.syms.size() && w.syms[i] == a && w.syms[i + 1] == b) next.push_back(id), ++i;
        else next.push_back(w.syms[i]);
      }
      w.syms = std::move(next);
      add_pairs(wi, +1);
      for (size_t i = 0; i + 1 < w.syms.size(); ++i)
        if (w.syms[i] == id || w.syms[i + 1] == id) touched.insert(key(w.syms[i], w.syms[i + 1]));
    }
    counts.erase(top.pair);
    for (uint64_t k : touched) queue.push({counts[k], k});
  }

  std::vector<std::string> spellings;
  std::unordered_set<std::string> seen;
  for (int32_t i = 0; i < int32_t(tokens.size()); ++i) {
    spellings.push_back(i < first_byte ? tokens[i] : data::byte_level_encode(tokens[i]));
    KILN_CHECK(seen.insert(spellings.back()).second, "tokenizer train: special token '", spellings.back(),
               "' is spelled like a learned token; choose another");
  }
  return {tokenizer_json(spellings, first_byte, merges, options_.pattern), int64_t(tokens.size()),
          int64_t(merges.size())};
}

}  // namespace kiln
