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
  const int64_t n = options.seq_len + 1;
  starts_.reserve(order_.size() + 1);
  for (int64_t d : order_) {
    KILN_CHECK(d >= 0 && d < corpus.num_documents(), "packing: document ", d, " out of range");
    const int64_t len = packed_length(corpus.document_length(d), options);
    if (options.whole_documents) {
      KILN_CHECK(len <= n, "packing: document ", d, " has ", len, " tokens, more than a window of ",
                 n, " (seq_len + 1): it cannot be trained on whole");
      const bool crosses = len > 0 && total_ / n != (total_ + len - 1) / n;
      if (crosses) total_ = (total_ / n + 1) * n;  // it starts the next window
    }
    starts_.push_back(total_);
    total_ += len;
  }
  if (options.whole_documents) total_ = (total_ + n - 1) / n * n;  // pad the last window
  starts_.push_back(total_);
  num_windows_ = total_ / n;
}

void PackedStream::sample(int64_t w, int64_t* ids, int64_t* targets, int64_t* doc_ids,
                          int64_t* positions) const {
  KILN_CHECK(w >= 0 && w < num_windows_, "packing: window ", w, " out of range [0, ",
             num_windows_, ")");
  const int64_t S = options_.seq_len, n = S + 1;
  const int64_t begin = w * n;
  // Window tokens, whether each is a training target, and the (in-order)
  // document index of each (-1 - k: the padding after document k).
  std::vector<int64_t> tok(static_cast<size_t>(n)), doc(tok.size());
  std::vector<uint8_t> trained(tok.size(), 1);
  auto k = int64_t(std::upper_bound(starts_.begin(), starts_.end(), begin) - starts_.begin()) - 1;
  const int64_t bos = options_.bos_id ? 1 : 0;
  for (int64_t filled = 0; filled < n; ++k) {
    const int64_t start = starts_[size_t(k)], span = starts_[size_t(k) + 1] - start;
    const int64_t body = corpus_->document_length(order_[size_t(k)]);
    const int64_t len = packed_length(body, options_);  // then padding up to span
    const int64_t j = begin + filled - start;           // offset within the span
    const int64_t take = std::min(span - j, n - filled);
    for (int64_t i = 0; i < take;) {
      const int64_t at = j + i, o = filled + i;
      if (at >= len) {
        tok[size_t(o)] = options_.pad_id, trained[size_t(o)] = 0, doc[size_t(o)] = -1 - k, ++i;
        continue;
      }
      doc[size_t(o)] = k;
      if (bos && at == 0) {
        tok[size_t(o)] = *options_.bos_id, ++i;
      } else if (at - bos >= body) {
        tok[size_t(o)] = *options_.eos_id, ++i;
      } else {
        int64_t count = std::min(body - (at - bos), take - i);
        corpus_->read(order_[size_t(k)], at - bos, count, tok.data() + o);
        corpus_->read_trained(order_[size_t(k)], at - bos, count, trained.data() + o);
        std::fill(doc.begin() + o, doc.begin() + o + count, k);
        i += count;
      }
    }
    filled += take;
  }
  int64_t local_doc = 0;
  for (int64_t s = 0; s < S; ++s) {
    bool new_doc = s > 0 && doc[size_t(s)] != doc[size_t(s) - 1];
    local_doc += new_doc ? 1 : 0;
    ids[s] = tok[size_t(s)];
    targets[s] = trained[size_t(s) + 1] ? tok[size_t(s) + 1] : options_.ignore_index;
    if (options_.ignore_cross_document_targets && doc[size_t(s) + 1] != doc[size_t(s)])
      targets[s] = options_.ignore_index;
    doc_ids[s] = local_doc;
    positions[s] = (s == 0 || new_doc) ? 0 : positions[s - 1] + 1;
  }
}

}  // namespace kiln::data
