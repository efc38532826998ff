#include "kiln/data/tokenizer_fingerprint.h"

#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <memory>

namespace kiln::data {
namespace {

// Fields are framed (integers fixed-width, strings length-prefixed) so no
// two different tokenizers hash the same bytes.
class Hasher {
 public:
  Hasher() : state_(XXH64_createState(), XXH64_freeState) { XXH64_reset(state_.get(), 0); }
  void add(int64_t v) { XXH64_update(state_.get(), &v, sizeof v); }
  void add(const std::string& s) {
    add(int64_t(s.size()));
    XXH64_update(state_.get(), s.data(), s.size());
  }
  uint64_t digest() const { return XXH64_digest(state_.get()); }

 private:
  std::unique_ptr<XXH64_state_t, XXH_errorcode (*)(XXH64_state_t*)> state_;
};

}  // namespace

uint64_t fingerprint_of(const TokenizerSpec& spec) {
  Hasher h;
  h.add(int64_t(spec.normalizers.size()));
  for (NormalForm f : spec.normalizers) h.add(int64_t(f));
  h.add(int64_t(spec.pre_tokenizer.size()));
  for (const PreTokenizeStep& s : spec.pre_tokenizer) {
    h.add(int64_t(s.kind));
    h.add(int64_t(s.pattern));
  }
  auto vocab = spec.vocab;
  std::sort(vocab.begin(), vocab.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  h.add(int64_t(vocab.size()));
  for (const auto& [spelling, id] : vocab) {
    h.add(id);
    h.add(spelling);
  }
  h.add(int64_t(spec.merges.size()));
  for (const auto& [a, b] : spec.merges) {
    h.add(a);
    h.add(b);
  }
  h.add(spec.bpe.ignore_merges);
  h.add(spec.bpe.fuse_unk);
  h.add(spec.bpe.unk_token.value_or(std::string("\0none", 5)));
  auto added = spec.added_tokens;
  std::sort(added.begin(), added.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  h.add(int64_t(added.size()));
  for (const AddedToken& t : added) {
    h.add(t.id);
    h.add(t.content);
    h.add(t.special | t.normalized << 1 | t.lstrip << 2 | t.rstrip << 3 | t.single_word << 4);
  }
  return h.digest();
}

std::string fingerprint_text(uint64_t fingerprint) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(fingerprint));
  return buf;
}

std::optional<uint64_t> parse_fingerprint(const std::string& text) {
  if (text.size() != 16 || text.find_first_not_of("0123456789abcdef") != std::string::npos)
    return std::nullopt;
  return std::stoull(text, nullptr, 16);
}

}  // namespace kiln::data
