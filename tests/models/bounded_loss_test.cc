// Bounded dynamism in training and evaluation graphs: batches of any size
// up to a bound ([rows, seq_len] <= [3, 8]) padded to it
// (data/bounded_batch.h) run one compiled forward + backward, with no
// recompilation, and give the loss and gradients of the unpadded batch,
// for each model family (the cross-entropy; MoE layers route every token on
// its own, so padding changes no real token's expert).
#include <gtest/gtest.h>

#include <cstdlib>

#include "kiln/data/bounded_batch.h"
#include "kiln/models/transformer.h"
#include "kiln/runtime/compile.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

class BoundedLoss : public ::testing::TestWithParam<const char*> {};

TEST_P(BoundedLoss, PaddedBatchesCompileOnceAndGiveTheUnpaddedLossAndGradients) {
  ModelConfig c = model_config(GetParam());
  c.seq_len = 8;
  auto model = build_model(c, DType::f32, 11);
  // ids, targets -> the loss, then its gradient for each parameter.
  auto loss_and_grads = [&](const std::vector<Tensor>& a) {
    ValueAndGrad r = nn::value_and_grad(
        *model, [&] { return std::vector<Tensor>{model->forward(a[0], a[1]).ce_loss}; });
    std::vector<Tensor> out = {r.values[0]};
    out.insert(out.end(), r.grads.begin(), r.grads.end());
    return out;
  };
  CompiledFunction bounded = compile(loss_and_grads, {.name = "bounded loss"});
  testing::internal::CaptureStderr();
  setenv("KILN_REPORT_RECOMPILES", "1", 1);
  for (int64_t rows = 1; rows <= 3; ++rows)
    for (int64_t len = 1; len <= 8; len += 1 + rows) {
      SCOPED_TRACE(testing::Message() << rows << " x " << len);
      Tensor ids = test::random_ids(rows, len, c.vocab_size, uint64_t(rows * 10 + len));
      Tensor targets = test::random_ids(rows, len, c.vocab_size, uint64_t(rows * 10 + len + 5));
      std::vector<Tensor> want = loss_and_grads({ids, targets});  // eager, unpadded
      data::Batch padded = data::pad_batch({ids, targets, {}, {}}, 3, 8);
      std::vector<Tensor> got = bounded({padded.ids, padded.targets});
      EXPECT_NEAR(got[0].item<float>(), want[0].item<float>(), 1e-5);
      for (size_t i = 1; i < want.size(); ++i)
        EXPECT_TRUE(test::all_close(got[i], want[i], 1e-4, 1e-6)) << model->named_parameters()[i - 1].first;
    }
  unsetenv("KILN_REPORT_RECOMPILES");
  EXPECT_EQ(testing::internal::GetCapturedStderr().find("recompiling"), std::string::npos);
  EXPECT_EQ(bounded.num_signatures(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Families, BoundedLoss,
                         ::testing::Values("llama3_debug", "qwen3_debug", "qwen3_moe_debug"));

}  // namespace
}  // namespace kiln
