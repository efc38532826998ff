#include "kiln/data/corpus.h"

#include <algorithm>

#include "kiln/base/error.h"

namespace kiln::data {

TokenCorpus TokenCorpus::from_tokens(std::vector<int32_t> tokens, std::vector<uint64_t> offsets) {
  auto owned = std::make_shared<std::vector<int32_t>>(std::move(tokens));
  TokenBlock block{owned, owned->data(), 4, int64_t(owned->size())};
  TokenCorpus corpus;
  corpus.add_block(std::move(block), offsets);
  return corpus;
}

TokenCorpus TokenCorpus::from_documents(const std::vector<std::vector<int32_t>>& docs) {
  std::vector<int32_t> tokens;
  std::vector<uint64_t> offsets{0};
  for (const auto& d : docs) {
    tokens.insert(tokens.end(), d.begin(), d.end());
    offsets.push_back(tokens.size());
  }
  return from_tokens(std::move(tokens), std::move(offsets));
}

TokenCorpus TokenCorpus::from_documents(const std::vector<std::vector<int32_t>>& docs,
                                        const std::vector<std::vector<uint8_t>>& masks) {
  KILN_CHECK(masks.size() == docs.size(), "token corpus: ", masks.size(), " masks for ",
             docs.size(), " documents");
  struct Owned {
    std::vector<int32_t> tokens;
    std::vector<uint8_t> trained;
  };
  auto owned = std::make_shared<Owned>();
  std::vector<uint64_t> offsets{0};
  for (size_t i = 0; i < docs.size(); ++i) {
    KILN_CHECK(masks[i].size() == docs[i].size(), "token corpus: document ", i, " has ",
               docs[i].size(), " tokens but a mask of ", masks[i].size());
    owned->tokens.insert(owned->tokens.end(), docs[i].begin(), docs[i].end());
    owned->trained.insert(owned->trained.end(), masks[i].begin(), masks[i].end());
    offsets.push_back(owned->tokens.size());
  }
  TokenBlock block{owned, owned->tokens.data(), 4, int64_t(owned->tokens.size()),
                   owned->trained.data()};
  TokenCorpus corpus;
  corpus.add_block(std::move(block), offsets);
  return corpus;
}

void TokenCorpus::add_block(TokenBlock block, std::span<const uint64_t> offsets) {
  KILN_CHECK(!offsets.empty() && offsets.front() == 0 && offsets.back() == uint64_t(block.size),
             "token corpus: document offsets must start at 0 and end at the block's ",
             block.size, " tokens");
  auto index = int32_t(blocks_.size());
  blocks_.push_back(std::move(block));
  for (size_t i = 0; i + 1 < offsets.size(); ++i) {
    KILN_CHECK(offsets[i] <= offsets[i + 1], "token corpus: document offsets decrease at ", i);
    docs_.push_back({index, int64_t(offsets[i]), int64_t(offsets[i + 1] - offsets[i])});
  }
  num_tokens_ += blocks_.back().size;
}

void TokenCorpus::append(const TokenCorpus& other) {
  auto base = int32_t(blocks_.size());
  blocks_.insert(blocks_.end(), other.blocks_.begin(), other.blocks_.end());
  for (Doc d : other.docs_) {
    d.block += base;
    docs_.push_back(d);
  }
  num_tokens_ += other.num_tokens_;
}

TokenCorpus TokenCorpus::subset(std::span<const int64_t> docs) const {
  TokenCorpus out;
  out.blocks_ = blocks_;
  out.docs_.reserve(docs.size());
  for (int64_t d : docs) {
    KILN_CHECK(d >= 0 && d < num_documents(), "token corpus: document ", d, " out of range [0, ",
               num_documents(), ")");
    out.docs_.push_back(docs_[size_t(d)]);
    out.num_tokens_ += docs_[size_t(d)].length;
  }
  return out;
}

void TokenCorpus::read(int64_t doc, int64_t begin, int64_t count, int64_t* out) const {
  const Doc& d = docs_[size_t(doc)];
  const TokenBlock& b = blocks_[size_t(d.block)];
  int64_t first = d.begin + begin;
  if (b.elem_bytes == 2) {
    auto* p = static_cast<const uint16_t*>(b.data) + first;
    for (int64_t i = 0; i < count; ++i) out[i] = p[i];
  } else {
    auto* p = static_cast<const uint32_t*>(b.data) + first;
    for (int64_t i = 0; i < count; ++i) out[i] = int32_t(p[i]);
  }
}

void TokenCorpus::read_trained(int64_t doc, int64_t begin, int64_t count, uint8_t* out) const {
  const Doc& d = docs_[size_t(doc)];
  const TokenBlock& b = blocks_[size_t(d.block)];
  if (!b.trained) return void(std::fill(out, out + count, uint8_t(1)));
  std::copy(b.trained + d.begin + begin, b.trained + d.begin + begin + count, out);
}

std::vector<int32_t> TokenCorpus::document(int64_t doc) const {
  std::vector<int64_t> wide(size_t(document_length(doc)));
  read(doc, 0, int64_t(wide.size()), wide.data());
  return {wide.begin(), wide.end()};
}

int32_t TokenCorpus::max_token() const {
  int32_t best = -1;
  std::vector<int64_t> buf;
  for (int64_t d = 0; d < num_documents(); ++d) {
    buf.resize(size_t(document_length(d)));
    read(d, 0, int64_t(buf.size()), buf.data());
    for (int64_t t : buf) best = std::max(best, int32_t(t));
  }
  return best;
}

}  // namespace kiln::data
