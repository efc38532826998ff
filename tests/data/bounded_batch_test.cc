// Padded batches: padding rows and columns carry id 0, the ignored target,
// a document of their own and position 0, and a pass over the epoch's
// windows in padded batches holds every window exactly once.
#include "kiln/data/bounded_batch.h"

#include <gtest/gtest.h>

#include "kiln/base/error.h"

namespace kiln::data {
namespace {

using V = std::vector<int64_t>;

TEST(BoundedBatch, PadsRowsAndColumnsWithNeutralValues) {
  Batch b{from_vector(V{1, 2, 3, 4}, {2, 2}), from_vector(V{2, 3, 4, 5}, {2, 2}),
          from_vector(V{0, 0, 1, 1}, {2, 2}), from_vector(V{0, 1, 0, 1}, {2, 2})};
  Batch p = pad_batch(b, 3, 3);
  EXPECT_EQ(p.ids.shape(), (Shape{3, 3}));
  EXPECT_EQ(p.ids.to_vector<int64_t>(), (V{1, 2, 0, 3, 4, 0, 0, 0, 0}));
  EXPECT_EQ(p.targets.to_vector<int64_t>(), (V{2, 3, -100, 4, 5, -100, -100, -100, -100}));
  EXPECT_EQ(p.doc_ids.to_vector<int64_t>(), (V{0, 0, -1, 1, 1, -1, -1, -1, -1}));
  EXPECT_EQ(p.positions.to_vector<int64_t>(), (V{0, 1, 0, 0, 1, 0, 0, 0, 0}));
  EXPECT_EQ(pad_batch({}, 1, 2).targets.to_vector<int64_t>(), (V{-100, -100}));
  EXPECT_THROW(pad_batch(b, 1, 3), Error);  // more rows than the bound
  EXPECT_THROW(pad_batch(b, 2, 1), Error);
}

TEST(BoundedBatch, EpochBatchesHoldEveryWindowOnce) {
  std::vector<std::vector<int32_t>> docs;
  for (int32_t d = 0; d < 9; ++d) docs.push_back({10 + 3 * d, 11 + 3 * d, 12 + 3 * d});
  LoaderOptions o;
  o.packing.seq_len = 4;
  o.local_batch_size = 2;
  o.shuffle = false;
  DataLoader loader(std::make_shared<TokenCorpus>(TokenCorpus::from_documents(docs)), o);
  const int64_t W = loader.windows_per_epoch();
  ASSERT_EQ(W % 2, 1) << "the test needs a partial last batch";
  for (int64_t first = 0; first < W + 2; first += 2) {
    Batch b = epoch_batch(loader, first, 2);
    ASSERT_EQ(b.ids.shape(), (Shape{2, 4}));
    for (int64_t r = 0; r < 2; ++r) {
      V row = b.targets.select(0, r).to_vector<int64_t>();
      if (first + r < W)
        EXPECT_EQ(row, loader.sample(first + r).targets.select(0, 0).to_vector<int64_t>());
      else
        EXPECT_EQ(row, V(4, -100)) << "window " << first + r << " is past the epoch";
    }
  }
}

}  // namespace
}  // namespace kiln::data
