// KV-cache decoding gives the logits of a full forward pass over the same
// tokens (prompt at once, then one token at a time), for each model family;
// sampling follows greedy / top-k / top-p / temperature.
#include "kiln/models/generate.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "kiln/base/error.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

class KVCache : public ::testing::TestWithParam<const char*> {};

TEST_P(KVCache, MatchesFullForward) {
  ModelConfig c = model_config(GetParam());
  c.seq_len = 16;
  auto model = build_model(c, DType::f32, 7);
  std::vector<int32_t> ids = {5, 17, 300, 2, 2047, 64, 9, 1000, 33, 12};
  Tensor full = model->logits(from_vector(ids, {1, int64_t(ids.size())}));  // [1, S, V]
  KVCacheDecoder dec(*model);
  const size_t prompt = 6;
  std::vector<float> got = dec.step(std::vector<int32_t>(ids.begin(), ids.begin() + prompt));
  for (size_t i = prompt;; ++i) {
    SCOPED_TRACE(i);
    std::vector<float> want = full.select(1, int64_t(i - 1)).to_vector<float>();
    EXPECT_TRUE(test::all_close(std::vector<double>(got.begin(), got.end()),
                                std::vector<double>(want.begin(), want.end()), 1e-4, 1e-5));
    if (i == ids.size()) break;
    got = dec.step({ids[i]});
  }
  EXPECT_EQ(dec.length(), int64_t(ids.size()));
  std::vector<int32_t> rest(7, 1);  // 10 + 7 > seq_len 16
  EXPECT_THROW(dec.step(rest), Error);
}

INSTANTIATE_TEST_SUITE_P(Families, KVCache,
                         ::testing::Values("llama3_debug", "qwen3_debug", "qwen3_moe_debug"));

TEST(Sampling, GreedyTopKTopPAndTemperature) {
  std::vector<float> logits = {std::log(0.2f), std::log(0.5f), std::log(0.3f)};
  std::mt19937_64 rng(1);
  EXPECT_EQ(sample_token(logits, {0.0, 0, 1.0}, rng), 1);  // greedy
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(sample_token(logits, {1.0, 1, 1.0}, rng), 1);   // top-1
    EXPECT_EQ(sample_token(logits, {1.0, 0, 0.4}, rng), 1);   // nucleus 0.4: only the 0.5 token
    EXPECT_NE(sample_token(logits, {1.0, 0, 0.75}, rng), 0);  // 0.5 + 0.3 reach 0.75
  }
  // Temperature 1 samples the softmax itself.
  std::map<int, int> counts;
  const int n = 20000;
  for (int i = 0; i < n; ++i) ++counts[sample_token(logits, {1.0, 0, 1.0}, rng)];
  EXPECT_NEAR(counts[0] / double(n), 0.2, 0.015);
  EXPECT_NEAR(counts[1] / double(n), 0.5, 0.015);
  EXPECT_NEAR(counts[2] / double(n), 0.3, 0.015);
  EXPECT_THROW(sample_token(logits, {1.0, 0, 0.0}, rng), Error);
  EXPECT_THROW(sample_token(logits, {-1.0, 0, 1.0}, rng), Error);
}

}  // namespace
}  // namespace kiln
