// Batches padded up to a bound, so that a partial batch keeps the shape of
// a full one: a compiled step or a deferred graph sees one shape for every
// logical size (bounded dynamism) and computes what the unpadded batch does.
// Padding positions have id 0, target ignore_index (so they add nothing to
// a mean loss over targets), doc_id -1 (a document of their own) and
// position 0; causal attention keeps them out of every real position.
#pragma once
#include <cstdint>

#include "kiln/data/loader.h"

namespace kiln::data {

// `b` ([r, s] each, r <= rows, s <= seq_len; undefined tensors: no rows)
// padded at the end of both dimensions to [rows, seq_len].
Batch pad_batch(const Batch& b, int64_t rows, int64_t seq_len, int64_t ignore_index = -100);

// The windows [first, first + rows) of one pass over the loader's first
// epoch, those past its last window replaced by padding rows: the batches
// of a pass over every window exactly once, the last one partial.
Batch epoch_batch(const DataLoader& loader, int64_t first, int64_t rows,
                  int64_t ignore_index = -100);

}  // namespace kiln::data
