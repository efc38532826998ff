// Sequence packing: windows of seq_len + 1 tokens over documents wrapped in
// BOS/EOS, with document ids and positions restarting per document. The
// expected samples are written out by hand from the packed stream.
#include <gtest/gtest.h>

#include "kiln/base/error.h"
#include "kiln/data/packing.h"

namespace kiln::data {
namespace {

using V = std::vector<int64_t>;

struct Sample {
  V ids, targets, doc_ids, positions;
};

Sample sample(const PackedStream& s, int64_t w, int64_t seq_len) {
  Sample r{V(size_t(seq_len)), V(size_t(seq_len)), V(size_t(seq_len)), V(size_t(seq_len))};
  s.sample(w, r.ids.data(), r.targets.data(), r.doc_ids.data(), r.positions.data());
  return r;
}

TokenCorpus three_docs() { return TokenCorpus::from_documents({{10, 11, 12}, {20, 21}, {30, 31, 32, 33}}); }

TEST(Packing, BosEosWindowsAlignedWithDocuments) {
  TokenCorpus c = three_docs();
  // Stream: 1 10 11 12 2 | 1 20 21 2 | 1 30 31 32 33 2 (15 tokens = 3 windows of 5).
  PackingOptions o{4, 1, 2};
  PackedStream s(c, {0, 1, 2}, o);
  EXPECT_EQ(s.stream_tokens(), 15);
  ASSERT_EQ(s.num_windows(), 3);
  Sample w0 = sample(s, 0, 4);
  EXPECT_EQ(w0.ids, (V{1, 10, 11, 12}));
  EXPECT_EQ(w0.targets, (V{10, 11, 12, 2}));
  EXPECT_EQ(w0.doc_ids, (V{0, 0, 0, 0}));
  EXPECT_EQ(w0.positions, (V{0, 1, 2, 3}));
  Sample w1 = sample(s, 1, 4);
  EXPECT_EQ(w1.ids, (V{1, 20, 21, 2}));
  EXPECT_EQ(w1.targets, (V{20, 21, 2, 1}));  // the next document's BOS
  Sample w2 = sample(s, 2, 4);
  EXPECT_EQ(w2.ids, (V{30, 31, 32, 33}));
  EXPECT_EQ(w2.targets, (V{31, 32, 33, 2}));
}

TEST(Packing, DocumentsSpanningWindows) {
  TokenCorpus c = three_docs();
  // Windows of 7: [1 10 11 12 2 1 20] [21 2 1 30 31 32 33]; the last 2 dropped.
  PackedStream s(c, {0, 1, 2}, PackingOptions{6, 1, 2});
  ASSERT_EQ(s.num_windows(), 2);
  Sample w0 = sample(s, 0, 6);
  EXPECT_EQ(w0.ids, (V{1, 10, 11, 12, 2, 1}));
  EXPECT_EQ(w0.targets, (V{10, 11, 12, 2, 1, 20}));
  EXPECT_EQ(w0.doc_ids, (V{0, 0, 0, 0, 0, 1}));
  EXPECT_EQ(w0.positions, (V{0, 1, 2, 3, 4, 0}));
  Sample w1 = sample(s, 1, 6);
  EXPECT_EQ(w1.ids, (V{21, 2, 1, 30, 31, 32}));
  EXPECT_EQ(w1.targets, (V{2, 1, 30, 31, 32, 33}));
  EXPECT_EQ(w1.doc_ids, (V{0, 0, 1, 1, 1, 1}));  // a continued document restarts at 0
  EXPECT_EQ(w1.positions, (V{0, 1, 0, 1, 2, 3}));
}

TEST(Packing, IgnoreCrossDocumentTargets) {
  TokenCorpus c = three_docs();
  PackingOptions o{6, 1, 2};
  o.ignore_cross_document_targets = true;
  PackedStream s(c, {0, 1, 2}, o);
  EXPECT_EQ(sample(s, 0, 6).targets, (V{10, 11, 12, 2, -100, 20}));
  EXPECT_EQ(sample(s, 1, 6).targets, (V{2, -100, 30, 31, 32, 33}));
}

TEST(Packing, NoBosNoEosAndOrder) {
  TokenCorpus c = three_docs();
  // Order 2, 0, 1: 30 31 32 33 10 11 12 20 21 -> windows of 4: [30 31 32 33] [10 11 12 20].
  PackedStream s(c, {2, 0, 1}, PackingOptions{3});
  ASSERT_EQ(s.num_windows(), 2);
  Sample w1 = sample(s, 1, 3);
  EXPECT_EQ(w1.ids, (V{10, 11, 12}));
  EXPECT_EQ(w1.targets, (V{11, 12, 20}));
  EXPECT_EQ(w1.doc_ids, (V{0, 0, 0}));
  EXPECT_EQ(w1.positions, (V{0, 1, 2}));
}

TEST(Packing, EosOnlyAndEmptyDocuments) {
  TokenCorpus c = TokenCorpus::from_documents({{5}, {}, {6, 7}});
  // EOS only: 5 2 | 2 | 6 7 2 -> one window of 6.
  PackingOptions o{5};
  o.eos_id = 2;
  PackedStream s(c, {0, 1, 2}, o);
  ASSERT_EQ(s.num_windows(), 1);
  Sample w = sample(s, 0, 5);
  EXPECT_EQ(w.ids, (V{5, 2, 2, 6, 7}));
  EXPECT_EQ(w.targets, (V{2, 2, 6, 7, 2}));
  EXPECT_EQ(w.doc_ids, (V{0, 0, 1, 2, 2}));
  EXPECT_EQ(w.positions, (V{0, 1, 0, 0, 1}));
}

// A corpus with training-target masks: tokens marked 0 are never targets.
TEST(Packing, UntrainedTokensAreNoTargets) {
  TokenCorpus c = TokenCorpus::from_documents({{10, 11, 12}, {20, 21}}, {{1, 0, 1}, {0, 1}});
  PackingOptions o{4, std::nullopt, std::nullopt};
  PackedStream s(c, {0, 1}, o);
  ASSERT_EQ(s.num_windows(), 1);
  Sample w = sample(s, 0, 4);
  EXPECT_EQ(w.ids, (V{10, 11, 12, 20}));
  EXPECT_EQ(w.targets, (V{-100, 12, -100, 21}));
}

// whole_documents: a document that does not fit starts the next window;
// the rest is padding (pad id, no target, a document of its own), the last
// window is padded, and a document longer than a window is refused.
TEST(Packing, WholeDocumentsAreNeverCut) {
  TokenCorpus c = three_docs();  // packed with EOS: 4, 3 and 5 tokens
  PackingOptions o{4, std::nullopt, 2};
  o.whole_documents = true;
  o.pad_id = 7;
  PackedStream s(c, {0, 1, 2}, o);
  // 10 11 12 2 pad | 20 21 2 pad pad | 30 31 32 33 2
  ASSERT_EQ(s.num_windows(), 3);
  Sample w0 = sample(s, 0, 4);
  EXPECT_EQ(w0.ids, (V{10, 11, 12, 2}));
  EXPECT_EQ(w0.targets, (V{11, 12, 2, -100}));
  EXPECT_EQ(w0.doc_ids, (V{0, 0, 0, 0}));
  Sample w1 = sample(s, 1, 4);
  EXPECT_EQ(w1.ids, (V{20, 21, 2, 7}));
  EXPECT_EQ(w1.targets, (V{21, 2, -100, -100}));
  EXPECT_EQ(w1.doc_ids, (V{0, 0, 0, 1}));
  EXPECT_EQ(w1.positions, (V{0, 1, 2, 0}));
  Sample w2 = sample(s, 2, 4);
  EXPECT_EQ(w2.ids, (V{30, 31, 32, 33}));
  EXPECT_EQ(w2.targets, (V{31, 32, 33, 2}));
  // Two short documents share a window; the last window is padded, not dropped.
  TokenCorpus two = TokenCorpus::from_documents({{5}, {6}, {8, 9}});
  PackedStream t(two, {0, 1, 2}, o);  // 5 2 6 2 pad | 8 9 2 pad pad
  ASSERT_EQ(t.num_windows(), 2);
  EXPECT_EQ(sample(t, 0, 4).ids, (V{5, 2, 6, 2}));
  EXPECT_EQ(sample(t, 1, 4).targets, (V{9, 2, -100, -100}));
  o.seq_len = 3;  // windows of 4: document 2 (5 tokens) cannot fit
  EXPECT_THROW(PackedStream(c, {0, 1, 2}, o), Error);
}

TEST(Packing, BadArguments) {
  TokenCorpus c = three_docs();
  EXPECT_THROW(PackedStream(c, {0, 5}, PackingOptions{4}), Error);
  EXPECT_THROW(PackedStream(c, {0}, PackingOptions{0}), Error);
  PackedStream s(c, {0, 1, 2}, PackingOptions{4});
  V buf(4);
  EXPECT_THROW(s.sample(s.num_windows(), buf.data(), buf.data(), buf.data(), buf.data()), Error);
}

TEST(Corpus, SubsetsShareStorageAndReadSlices) {
  TokenCorpus c = three_docs();
  EXPECT_EQ(c.num_documents(), 3);
  EXPECT_EQ(c.num_tokens(), 9);
  std::vector<int64_t> pick{2, 0};
  TokenCorpus s = c.subset(pick);
  EXPECT_EQ(s.num_tokens(), 7);
  EXPECT_EQ(s.document(0), (std::vector<int32_t>{30, 31, 32, 33}));
  V out(2);
  s.read(0, 1, 2, out.data());
  EXPECT_EQ(out, (V{31, 32}));
  EXPECT_EQ(c.max_token(), 33);
  std::vector<int64_t> bad{3};
  EXPECT_THROW(c.subset(bad), Error);
}

}  // namespace
}  // namespace kiln::data
