// Sequence packing. The documents of a corpus, in a given order and each
// wrapped as [BOS] tokens [EOS] (each when configured), are concatenated
// into one stream that is cut into consecutive windows of seq_len + 1
// tokens (the tail that does not fill a window is dropped), as TorchTitan
// does. A window w gives one sample:
//   ids[s]       = w[s]          s in [0, seq_len)
//   targets[s]   = w[s + 1]
//   doc_ids[s]   = which document w[s] belongs to, numbered from 0 in each
//                  sample (BOS belongs to the document it opens, EOS to the
//                  one it closes): the packed-document attention mask
//   positions[s] = s minus the start of w[s]'s document within the sample
//                  (restarting at 0 at each document and at the sample start)
// With ignore_cross_document_targets, targets[s] = ignore_index where w[s+1]
// starts another document (w[s] is the last token of its document).
// Tokens the corpus marks as no training target (a chat's prompt tokens)
// are never targets: targets[s] = ignore_index where w[s+1] is one.
// With whole_documents, no document is cut: one that does not fit in the
// rest of a window starts the next, the rest being padding (id pad_id, no
// target, a document of its own), and the last window is padded too, so
// every document is in some window; a document longer than a window is a
// kiln::Error.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "kiln/data/corpus.h"

namespace kiln::data {

struct PackingOptions {
  int64_t seq_len = 2048;
  std::optional<int32_t> bos_id, eos_id;
  bool ignore_cross_document_targets = false;
  int64_t ignore_index = -100;
  bool whole_documents = false;
  int32_t pad_id = 0;
};

// One epoch's stream: `corpus` documents in `order`; random access to windows.
class PackedStream {
 public:
  PackedStream(const TokenCorpus& corpus, std::vector<int64_t> order, const PackingOptions& options);

  int64_t num_windows() const { return num_windows_; }
  int64_t stream_tokens() const { return total_; }
  // Writes window `w`'s sample: each output has seq_len entries.
  void sample(int64_t w, int64_t* ids, int64_t* targets, int64_t* doc_ids, int64_t* positions) const;

 private:
  const TokenCorpus* corpus_;
  std::vector<int64_t> order_;
  // Stream offset of each document in order_ (+ total at the end); with
  // whole_documents, padding may follow a document up to the next start.
  std::vector<int64_t> starts_;
  PackingOptions options_;
  int64_t total_ = 0, num_windows_ = 0;
};

// Tokens one document takes in the stream (its length plus BOS/EOS).
int64_t packed_length(int64_t doc_tokens, const PackingOptions& options);

}  // namespace kiln::data
