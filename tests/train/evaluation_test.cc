// The validation loss over the whole split is the mean cross-entropy over
// every target of every window, each window counted once, as a forward pass
// over each window alone gives it, however the windows fall into batches.
#include "kiln/train/evaluation.h"

#include <gtest/gtest.h>

#include "kiln/base/error.h"
#include "kiln/ops/cross_entropy.h"
#include "tests/support/support.h"

namespace kiln::train {
namespace {

TEST(Validation, WholeSplitIsEveryTargetOnceWithThePartialBatchPadded) {
  ModelConfig c = model_config("llama3_debug");
  c.seq_len = 8;
  auto model = build_model(c, DType::f32, 5);
  std::vector<std::vector<int32_t>> docs;
  for (int32_t d = 0; d < 11; ++d) {
    std::vector<int32_t> doc;
    for (int32_t i = 0; i < 2 + d % 5; ++i) doc.push_back(3 + (d * 37 + i * 11) % 500);
    docs.push_back(doc);
  }
  data::LoaderOptions o;
  o.packing.seq_len = 8;
  o.packing.eos_id = 2;
  o.packing.ignore_cross_document_targets = true;  // windows hold different numbers of targets
  o.local_batch_size = 3;
  o.shuffle = false;
  data::DataLoader loader(std::make_shared<data::TokenCorpus>(data::TokenCorpus::from_documents(docs)), o);
  const int64_t W = loader.windows_per_epoch();
  ASSERT_NE(W % 3, 0) << "the test needs a partial last batch";

  // Independently: each window alone, its summed cross-entropy and its targets.
  double sum = 0, count = 0;
  for (int64_t n = 0; n < W; ++n) {
    data::Batch s = loader.sample(n);
    Tensor logits = model->logits(s.ids);
    sum += cross_entropy(logits, s.targets, -100, Reduction::sum).item<double>();
    for (int64_t t : s.targets.to_vector<int64_t>()) count += t != -100;
  }
  ValidationPass pass;
  pass.local_batch_size = 3;
  EXPECT_NEAR(validation_loss(*model, loader, pass), sum / count, 1e-6 * sum / count);

  // A fixed number of batches takes the loader's batches as they come (it wraps).
  pass.steps = 2;
  EXPECT_TRUE(std::isfinite(validation_loss(*model, loader, pass)));
  pass.steps = 0;
  EXPECT_THROW(validation_loss(*model, loader, pass), Error);
}

}  // namespace
}  // namespace kiln::train
