#include "kiln/data/bounded_batch.h"

#include <algorithm>
#include <vector>

#include "kiln/base/error.h"

namespace kiln::data {
namespace {

// t ([r, s] i64, or undefined for no rows) padded with `value` to [rows, seq_len].
Tensor pad_rows(const Tensor& t, int64_t rows, int64_t seq_len, int64_t value) {
  std::vector<int64_t> out(size_t(rows * seq_len), value);
  if (!t.defined()) return from_vector(out, {rows, seq_len});
  KILN_CHECK(t.rank() == 2 && t.dim(0) <= rows && t.dim(1) <= seq_len,
             "pad_batch: a [", t.dim(0), ", ", t.dim(1), "] batch does not fit in the bound [",
             rows, ", ", seq_len, "]");
  std::vector<int64_t> in = t.to(DType::i64).to_vector<int64_t>();
  const int64_t r = t.dim(0), s = t.dim(1);
  for (int64_t i = 0; i < r; ++i)
    std::copy(in.begin() + i * s, in.begin() + (i + 1) * s, out.begin() + i * seq_len);
  return from_vector(out, {rows, seq_len});
}

}  // namespace

Batch pad_batch(const Batch& b, int64_t rows, int64_t seq_len, int64_t ignore_index) {
  KILN_CHECK(rows >= 1 && seq_len >= 1, "pad_batch: the bound must be at least [1, 1], got [",
             rows, ", ", seq_len, "]");
  return {pad_rows(b.ids, rows, seq_len, 0), pad_rows(b.targets, rows, seq_len, ignore_index),
          pad_rows(b.doc_ids, rows, seq_len, -1), pad_rows(b.positions, rows, seq_len, 0)};
}

Batch epoch_batch(const DataLoader& loader, int64_t first, int64_t rows, int64_t ignore_index) {
  KILN_CHECK(first >= 0 && rows >= 1, "epoch_batch: windows [", first, ", ", first + rows,
             ") are not a batch");
  const int64_t last = std::min(first + rows, loader.windows_per_epoch());
  const int64_t seq_len = loader.sample(0).ids.dim(1);
  if (last <= first) return pad_batch({}, rows, seq_len, ignore_index);
  std::vector<int64_t> ids, targets, docs, positions;
  for (int64_t n = first; n < last; ++n) {
    Batch s = loader.sample(n);
    for (auto [from, to] : {std::pair{&s.ids, &ids}, {&s.targets, &targets},
                            {&s.doc_ids, &docs}, {&s.positions, &positions}}) {
      std::vector<int64_t> row = from->to_vector<int64_t>();
      to->insert(to->end(), row.begin(), row.end());
    }
  }
  const Shape shape{last - first, seq_len};
  return pad_batch({from_vector(ids, shape), from_vector(targets, shape), from_vector(docs, shape),
                    from_vector(positions, shape)},
                   rows, seq_len, ignore_index);
}

}  // namespace kiln::data
