// The data loader: deterministic order, the data-parallel split (ranks'
// local batches concatenated == one rank's global batch), gradient
// accumulation, epochs, and resuming from a serialised position.
#include <gtest/gtest.h>

#include <set>

#include "kiln/base/error.h"
#include "kiln/data/loader.h"
#include "kiln/ops/shape.h"

namespace kiln::data {
namespace {

using V = std::vector<int64_t>;

// 40 documents of varying lengths with distinct tokens.
std::shared_ptr<const TokenCorpus> corpus() {
  std::vector<std::vector<int32_t>> docs;
  int32_t next = 3;
  for (int d = 0; d < 40; ++d) {
    std::vector<int32_t> doc;
    for (int i = 0; i < 3 + (d * 7) % 11; ++i) doc.push_back(next++);
    docs.push_back(doc);
  }
  return std::make_shared<TokenCorpus>(TokenCorpus::from_documents(docs));
}

LoaderOptions options(int64_t local, int64_t rank = 0, int64_t world = 1, int64_t accum = 1) {
  LoaderOptions o;
  o.packing.seq_len = 8;
  o.packing.bos_id = 1;
  o.packing.eos_id = 2;
  o.local_batch_size = local;
  o.dp_rank = rank;
  o.dp_world = world;
  o.grad_accum_steps = accum;
  o.seed = 1234;
  return o;
}

V flat(const Batch& b) {
  V all;
  for (const Tensor* t : {&b.ids, &b.targets, &b.doc_ids, &b.positions}) {
    auto v = t->to_vector<int64_t>();
    all.insert(all.end(), v.begin(), v.end());
  }
  return all;
}

Batch cat_batches(const std::vector<Batch>& parts) {
  auto join = [&](Tensor Batch::*field) {
    std::vector<Tensor> ts;
    for (const auto& p : parts) ts.push_back(p.*field);
    return concat(ts, 0);
  };
  return {join(&Batch::ids), join(&Batch::targets), join(&Batch::doc_ids), join(&Batch::positions)};
}

TEST(Loader, BatchShapesAndDtypes) {
  DataLoader l(corpus(), options(3));
  Batch b = l.next();
  for (const Tensor* t : {&b.ids, &b.targets, &b.doc_ids, &b.positions}) {
    EXPECT_EQ(t->shape(), Shape({3, 8}));
    EXPECT_EQ(t->dtype(), DType::i64);
  }
  // Targets are the ids shifted by one within the packed stream.
  auto ids = b.ids.to_vector<int64_t>(), tg = b.targets.to_vector<int64_t>();
  for (int r = 0; r < 3; ++r)
    for (int s = 0; s + 1 < 8; ++s) EXPECT_EQ(tg[size_t(r * 8 + s)], ids[size_t(r * 8 + s + 1)]);
}

TEST(Loader, DeterministicAndSeeded) {
  DataLoader a(corpus(), options(4)), b(corpus(), options(4));
  auto other = options(4);
  other.seed = 99;
  DataLoader c(corpus(), other);
  bool differs = false;
  for (int step = 0; step < 10; ++step) {
    V x = flat(a.next());
    EXPECT_EQ(x, flat(b.next())) << "step " << step;
    differs = differs || x != flat(c.next());
  }
  EXPECT_TRUE(differs) << "another seed should give another order";
}

TEST(Loader, EveryMeshSeesTheSameGlobalBatch) {
  // Global batch 4: one rank of 4; two ranks of 2; four ranks of 1; one rank
  // of 2 with 2 accumulation steps; two ranks of 1 with 2 accumulation steps.
  DataLoader single(corpus(), options(4));
  std::vector<std::unique_ptr<DataLoader>> two, four, two_accum;
  for (int r = 0; r < 2; ++r) two.push_back(std::make_unique<DataLoader>(corpus(), options(2, r, 2)));
  for (int r = 0; r < 4; ++r) four.push_back(std::make_unique<DataLoader>(corpus(), options(1, r, 4)));
  for (int r = 0; r < 2; ++r)
    two_accum.push_back(std::make_unique<DataLoader>(corpus(), options(1, r, 2, 2)));
  DataLoader accum(corpus(), options(2, 0, 1, 2));
  for (int step = 0; step < 12; ++step) {  // crosses several epochs
    V want = flat(single.next());
    std::vector<Batch> parts;
    for (auto& l : two) parts.push_back(l->next());
    EXPECT_EQ(flat(cat_batches(parts)), want) << "2 ranks, step " << step;
    parts.clear();
    for (auto& l : four) parts.push_back(l->next());
    EXPECT_EQ(flat(cat_batches(parts)), want) << "4 ranks, step " << step;
    parts = {accum.next()};
    parts.push_back(accum.next());
    EXPECT_EQ(flat(cat_batches(parts)), want) << "accumulation, step " << step;
    parts.clear();
    for (auto& l : two_accum) {
      parts.push_back(l->next());
      parts.push_back(l->next());
    }
    EXPECT_EQ(flat(cat_batches(parts)), want) << "2 ranks x accumulation, step " << step;
  }
}

TEST(Loader, EpochsReshuffleAndCoverEveryWindow) {
  auto c = corpus();
  DataLoader l(c, options(1));
  const int64_t W = l.windows_per_epoch();
  ASSERT_GT(W, 4);
  // Each epoch packs every document, in another order: the windows (ids
  // and targets) cover every token but the dropped tail (< seq_len + 1).
  auto epoch_samples = [&](int64_t e) {
    std::vector<V> s;
    for (int64_t w = 0; w < W; ++w) {
      Batch b = l.sample(e * W + w);
      s.push_back(b.ids.to_vector<int64_t>());
      s.push_back(b.targets.to_vector<int64_t>());
    }
    return s;
  };
  auto uncovered = [&](const std::vector<V>& s) {
    std::set<int64_t> seen;
    for (const auto& v : s) seen.insert(v.begin(), v.end());
    int64_t missing = 0;
    for (int64_t d = 0; d < c->num_documents(); ++d)
      for (int32_t t : c->document(d)) missing += seen.count(t) ? 0 : 1;
    return missing;
  };
  auto e0 = epoch_samples(0), e1 = epoch_samples(1);
  EXPECT_NE(e0, e1);
  EXPECT_LT(uncovered(e0), 9);
  EXPECT_LT(uncovered(e1), 9);
  for (int64_t i = 0; i < W; ++i) l.next();
  EXPECT_EQ(l.epoch(), 1);
  // Without shuffle, epochs repeat.
  auto o = options(1);
  o.shuffle = false;
  DataLoader fixed(c, o);
  EXPECT_EQ(flat(fixed.sample(0)), flat(fixed.sample(fixed.windows_per_epoch())));
}

TEST(Loader, ResumeFromSerialisedPosition) {
  for (int64_t accum : {1, 2}) {
    DataLoader a(corpus(), options(3, 0, 1, accum));
    for (int i = 0; i < 7; ++i) a.next();  // mid-step when accumulating
    nlohmann::json state = nlohmann::json::parse(a.to_json().dump());
    DataLoader b(corpus(), options(3, 0, 1, accum));
    b.load_json(state);
    for (int i = 0; i < 10; ++i) EXPECT_EQ(flat(a.next()), flat(b.next())) << "batch " << i;
  }
  // A position taken on one rank resumes on another mesh with the same global batch.
  DataLoader one(corpus(), options(4));
  for (int i = 0; i < 3; ++i) one.next();
  DataLoader r1(corpus(), options(2, 1, 2));
  r1.load_json(one.to_json());
  Batch want = one.next();
  EXPECT_EQ(r1.next().ids.to_vector<int64_t>(), want.ids.slice(0, 2, 4).contiguous().to_vector<int64_t>());
}

TEST(Loader, ResumeChecksSettings) {
  DataLoader a(corpus(), options(4));
  a.next();
  auto other = options(4);
  other.seed = 7;
  DataLoader b(corpus(), other);
  try {
    b.load_json(a.to_json());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("training.seed"), std::string::npos) << e.what();
  }
  DataLoader c(corpus(), options(2));
  EXPECT_THROW(c.load_json(a.to_json()), Error);  // another global batch
  EXPECT_THROW(c.load_json(nlohmann::json::object()), Error);
}

TEST(Loader, BadOptionsAndTinyCorpus) {
  auto tiny = std::make_shared<TokenCorpus>(TokenCorpus::from_documents({{5, 6}}));
  try {
    DataLoader l(tiny, options(1));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("seq_len"), std::string::npos) << e.what();
  }
  EXPECT_THROW(DataLoader(corpus(), options(0)), Error);
  EXPECT_THROW(DataLoader(corpus(), options(1, 2, 2)), Error);
  EXPECT_THROW(DataLoader(std::make_shared<TokenCorpus>(), options(1)), Error);
}

TEST(Loader, ShuffledOrderIsAPermutation) {
  auto p = shuffled_order(100, 3, 0);
  auto sorted = p;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 100; ++i) EXPECT_EQ(sorted[size_t(i)], i);
  EXPECT_NE(p, shuffled_order(100, 3, 1));
  EXPECT_EQ(p, shuffled_order(100, 3, 0));
}

}  // namespace
}  // namespace kiln::data
