#include "kiln/data/packing.h"

#include <algorithm>

#include "kiln/base/error.h"

namespace kiln::data {

int64_t packed_length(int64_t doc_tokens, const PackingOptions& options) {
  return doc_tokens + (options.bos_id ? 1 : 0) + (options.eos_id ? 1 : 0);
}

PackedStream::PackedStream(const TokenCorpus& corpus, std::vector<int64_t> order,
                           const PackingOptions& options)
    : corpus_(&corpus), order_(std::move(order)), options_(options) {
  KILN_CHECK(options.seq_len >= 1, "packing: seq_len must be at least 1, not ", options.seq_len);
  starts_.reserve(order_.size() + 1);
  for (int64_t d : order_) {
    KILN_CHECK(d >= 0 && d < corpus.num_documents(), "packing: document ", d, " out of range");
    starts_.push_back(total_);
    total_ += packed_length(corpus.document_length(d), options);
  }
  starts_.push_back(total_);
  num_windows_ = total_ / (options.seq_len + 1);
}

void PackedStream::sample(int64_t w, int64_t* ids, int64_t* targets, int64_t* doc_ids,
                          int64_t* positions) const {
  KILN_CHECK(w >= 0 && w < num_windows_, "packing: window ", w, " out of range [0, ",
             num_windows_, ")");
  const int64_t S = options_.seq_len, n = S + 1;
  const int64_t begin = w * n;
  // Window tokens and the (in-order) document index of each.
  std::vector<int64_t> tok(static_cast<size_t>(n)), doc(tok.size());
  auto k = int64_t(std::upper_bound(starts_.begin(), starts_.end(), begin) - starts_.begin()) - 1;
  int64_t filled = 0;
  while (filled < n) {
    const int64_t start = starts_[size_t(k)], len = starts_[size_t(k) + 1] - start;
    int64_t j = begin + filled - start;  // offset within the packed document
    int64_t take = std::min(len - j, n - filled);
    int64_t* out = tok.data() + filled;
    std::fill(doc.begin() + filled, doc.begin() + filled + take, k);
    const int64_t bos = options_.bos_id ? 1 : 0;
    const int64_t body = corpus_->document_length(order_[size_t(k)]);
    for (int64_t i = 0; i < take;) {
      int64_t at = j + i;
      if (bos && at == 0) {
        out[i++] = *options_.bos_id;
      } else if (at - bos >= body) {
        out[i++] = *options_.eos_id;
      } else {
        int64_t count = std::min(body - (at - bos), take - i);
        corpus_->read(order_[size_t(k)], at - bos, count, out + i);
        i += count;
      }
    }
    filled += take;
    ++k;
  }
  int64_t local_doc = 0;
  for (int64_t s = 0; s < S; ++s) {
    bool new_doc = s > 0 && doc[size_t(s)] != doc[size_t(s) - 1];
    local_doc += new_doc ? 1 : 0;
    ids[s] = tok[size_t(s)];
    targets[s] = tok[size_t(s) + 1];
    if (options_.ignore_cross_document_targets && doc[size_t(s) + 1] != doc[size_t(s)])
      targets[s] = options_.ignore_index;
    doc_ids[s] = local_doc;
    positions[s] = (s == 0 || new_doc) ? 0 : positions[s - 1] + 1;
  }
}

}  // namespace kiln::data
