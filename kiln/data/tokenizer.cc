#include "kiln/data/tokenizer.h"

#include <deque>

#include "kiln/base/error.h"
#include "kiln/data/byte_level.h"
#include "kiln/data/tokenizer_fingerprint.h"
#include "kiln/data/utf8.h"

namespace kiln {

using namespace kiln::data;

namespace {
enum Kind : uint8_t { kUnused = 0, kModel = 1, kAdded = 2, kSpecial = 3 };

// What a token decodes to, as HF's ByteLevel decoder reads it: the bytes its
// byte-level spelling stands for, or its own text when it is not spelled in
// that alphabet (added tokens such as "<|endoftext|>" read the same either way).
std::string decoded_bytes(const std::string& token) {
  if (auto b = byte_level_decode(token)) return *b;
  return token;
}
}  // namespace

Tokenizer::Tokenizer(TokenizerSpec spec)
    : fingerprint_(data::fingerprint_of(spec)),
      normalizers_(std::move(spec.normalizers)),
      pre_tokenizer_(std::move(spec.pre_tokenizer)),
      model_(spec.vocab, spec.merges, spec.bpe),
      prefix_ids_(std::move(spec.prefix_ids)),
      suffix_ids_(std::move(spec.suffix_ids)) {
  // Ids index tables, so they must number the entries (holes allowed up to
  // kMaxIdGap): one far-off id would otherwise allocate gigabytes.
  constexpr int64_t kMaxIdGap = 65536;
  const int64_t entries = int64_t(spec.vocab.size() + spec.added_tokens.size());
  int32_t size = 0;
  auto check_id = [&](int32_t id, const std::string& token) {
    KILN_CHECK(id >= 0 && id < entries + kMaxIdGap, "token '", token, "' has id ", id,
               ", but the tokenizer has ", entries, " entries: ids must number them from 0 (with "
               "gaps of at most ", kMaxIdGap, ")");
    size = std::max(size, id + 1);
  };
  for (const auto& [spelling, id] : spec.vocab) check_id(id, spelling);
  for (const AddedToken& t : spec.added_tokens) {
    KILN_CHECK(!t.content.empty(), "added token ", t.id, " has empty content");
    check_id(t.id, t.content);
  }
  tokens_.resize(size);
  bytes_.resize(size);
  kind_.assign(size, kUnused);
  // Two spellings of one id would make encode and decode disagree.
  for (const auto& [spelling, id] : spec.vocab) {
    KILN_CHECK(kind_[id] == kUnused, "model.vocab gives id ", id, " to both '", tokens_[id],
               "' and '", spelling, "'");
    tokens_[id] = spelling;
    bytes_[id] = decoded_bytes(spelling);
    kind_[id] = kModel;
  }
  std::vector<AddedToken> raw, normalized;
  for (AddedToken& t : spec.added_tokens) {
    // An added token may repeat its vocabulary entry (GPT-2's <|endoftext|>), not replace another.
    KILN_CHECK(kind_[t.id] == kUnused || tokens_[t.id] == t.content, "added token '", t.content,
               "' has id ", t.id, ", which ",
               kind_[t.id] == kModel ? "the vocabulary" : "another added token", " gives to '",
               tokens_[t.id], "'");
    auto [it, fresh] = added_by_content_.emplace(t.content, t.id);
    KILN_CHECK(fresh || it->second == t.id, "added token '", t.content, "' appears twice, with ids ",
               it->second, " and ", t.id);
    tokens_[t.id] = t.content;
    bytes_[t.id] = decoded_bytes(t.content);
    kind_[t.id] = t.special ? kSpecial : kAdded;
    if (t.normalized) {
      // HF matches normalized tokens by their normalized content.
      for (NormalForm f : normalizers_) t.content = normalize(t.content, f);
      normalized.push_back(std::move(t));
    } else {
      raw.push_back(std::move(t));
    }
  }
  raw_added_ = AddedTokenMatcher(std::move(raw));
  normalized_added_ = AddedTokenMatcher(std::move(normalized));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 1);
  encode(text, ids);
  return ids;
}

std::vector<int32_t> Tokenizer::encode_with_special_tokens(std::string_view text) const {
  std::vector<int32_t> ids = prefix_ids_;
  encode(text, ids);
  ids.insert(ids.end(), suffix_ids_.begin(), suffix_ids_.end());
  return ids;
}

void Tokenizer::encode(std::string_view text, std::vector<int32_t>& out) const {
  size_t bad = find_invalid_utf8(text);
  KILN_CHECK(bad == std::string_view::npos, "tokenizer: the text is not valid UTF-8 (byte ", bad,
             " of ", text.size(), "); convert it to UTF-8 first");
  if (raw_added_.empty()) return encode_text(text, out);
  std::vector<Segment> segments;
  raw_added_.split(text, segments);
  for (const Segment& s : segments) {
    if (s.id >= 0) out.push_back(s.id);
    else encode_text(s.text, out);
  }
}

// Text between raw added tokens: normalize, then find the normalized ones.
void Tokenizer::encode_text(std::string_view text, std::vector<int32_t>& out) const {
  std::string normalized;
  if (!normalizers_.empty()) {
    normalized = normalize(text, normalizers_[0]);
    for (size_t i = 1; i < normalizers_.size(); ++i) normalized = normalize(normalized, normalizers_[i]);
    text = normalized;
  }
  if (normalized_added_.empty()) return encode_normalized(text, out);
  std::vector<Segment> segments;
  normalized_added_.split(text, segments);
  for (const Segment& s : segments) {
    if (s.id >= 0) out.push_back(s.id);
    else encode_normalized(s.text, out);
  }
}

void Tokenizer::encode_normalized(std::string_view text, std::vector<int32_t>& out) const {
  thread_local std::vector<std::string_view> pieces, next;
  pieces.assign(1, text);
  std::deque<std::string> owned;  // pieces given a prefix space (a deque never moves them)
  for (const PreTokenizeStep& step : pre_tokenizer_) {
    next.clear();
    if (step.kind == PreTokenizeStep::split) {
      for (std::string_view p : pieces) split(step.pattern, p, next);
    } else {
      for (std::string_view p : pieces) {
        if (p.empty()) continue;
        if (p[0] == ' ') {
          next.push_back(p);
        } else {
          std::string& prefixed = owned.emplace_back(1, ' ');
          prefixed += p;
          next.push_back(prefixed);
        }
      }
    }
    std::swap(pieces, next);
  }
  for (std::string_view p : pieces) model_.encode(p, out);
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  std::string bytes;
  for (int32_t id : ids) {
    KILN_CHECK(id >= 0 && id < vocab_size() && kind_[id] != kUnused, "tokenizer: cannot decode id ", id,
               ": not in the vocabulary (size ", vocab_size(), ")");
    if (skip_special_tokens && kind_[id] == kSpecial) continue;
    bytes += bytes_[id];
  }
  return to_valid_utf8(bytes);
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (auto it = added_by_content_.find(token); it != added_by_content_.end()) return it->second;
  if (auto it = model_.vocab().find(token); it != model_.vocab().end()) return it->second;
  return std::nullopt;
}

const std::string& Tokenizer::id_to_token(int32_t id) const {
  KILN_CHECK(id >= 0 && id < vocab_size() && kind_[id] != kUnused, "tokenizer: id ", id,
             " is not in the vocabulary (size ", vocab_size(), ")");
  return tokens_[id];
}

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && id < vocab_size() && kind_[id] == kSpecial;
}

namespace {

std::optional<int32_t> first_token(const Tokenizer& tok, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (auto id = tok.token_to_id(n)) return id;
  return std::nullopt;
}

}  // namespace

std::optional<int32_t> bos_token_id(const Tokenizer& tok) {
  return first_token(tok, {"<|begin_of_text|>", "<s>"});
}

std::optional<int32_t> eos_token_id(const Tokenizer& tok) {
  return first_token(tok, {"<|end_of_text|>", "<|endoftext|>", "</s>"});
}

}  // namespace kiln
