// KV-cache decoding gives the logits of a full forward pass over the same
// tokens (prompt at once, then one token at a time), for each model family,
// with every prompt length and batch row compiled once for the bound;
// sampling follows greedy / top-k / top-p / temperature.
#include "kiln/models/generate.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <map>

#include "kiln/base/error.h"
#include "kiln/runtime/executable.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

class KVCache : public ::testing::TestWithParam<const char*> {};

// The logits after each of ids[0..n) from a forward pass over them alone.
std::vector<std::vector<double>> full_forward(const CausalLM& model, const std::vector<int32_t>& ids) {
  Tensor full = model.logits(from_vector(ids, {1, int64_t(ids.size())}));  // [1, S, V]
  std::vector<std::vector<double>> out;
  for (size_t i = 0; i < ids.size(); ++i) {
    std::vector<float> row = full.select(1, int64_t(i)).to_vector<float>();
    out.emplace_back(row.begin(), row.end());
  }
  return out;
}

void expect_close(const std::vector<float>& got, const std::vector<double>& want) {
  EXPECT_TRUE(test::all_close(std::vector<double>(got.begin(), got.end()), want, 1e-4, 1e-5));
}

TEST_P(KVCache, MatchesFullForward) {
  ModelConfig c = model_config(GetParam());
  c.seq_len = 16;
  auto model = build_model(c, DType::f32, 7);
  std::vector<int32_t> ids = {5, 17, 300, 2, 2047, 64, 9, 1000, 33, 12};
  std::vector<std::vector<double>> want = full_forward(*model, ids);
  KVCacheDecoder dec(*model, 1, 12);
  const size_t prompt = 6;
  std::vector<float> got =
      dec.prefill({std::vector<int32_t>(ids.begin(), ids.begin() + prompt)})[0];
  for (size_t i = prompt;; ++i) {
    SCOPED_TRACE(i);
    expect_close(got, want[i - 1]);
    if (i == ids.size()) break;
    got = dec.decode({ids[i]})[0];
  }
  EXPECT_EQ(dec.lengths(), std::vector<int64_t>{int64_t(ids.size())});
  dec.decode({1});
  dec.decode({1});  // 12 tokens: the cache is full
  EXPECT_THROW(dec.decode({1}), Error);
  EXPECT_THROW(dec.prefill({std::vector<int32_t>(13, 1)}), Error);
  EXPECT_THROW(KVCacheDecoder(*model, 1, 17), Error);  // beyond the rotary tables
}

// Rows of different lengths in one batch, a batch not full, and every
// prompt length from 1 to the bound: two programs in all, and each row's
// logits are those of its tokens alone.
TEST_P(KVCache, BoundedShapesCompileOnceAndRowsAreIndependent) {
  ModelConfig c = model_config(GetParam());
  c.seq_len = 8;
  auto model = build_model(c, DType::f32, 3);
  const std::vector<int32_t> tokens = {11, 400, 7, 1999, 23, 5, 880, 42};
  KVCacheDecoder dec(*model, 3);
  testing::internal::CaptureStderr();
  setenv("KILN_REPORT_RECOMPILES", "1", 1);
  for (size_t n = 1; n <= tokens.size(); ++n) {
    SCOPED_TRACE(n);
    std::vector<int32_t> a(tokens.begin(), tokens.begin() + long(n));
    std::vector<int32_t> b(tokens.rbegin(), tokens.rbegin() + long((n + 1) / 2));
    std::vector<std::vector<float>> got = n % 2 ? dec.prefill({a, b}) : dec.prefill({b, a, a});
    const std::vector<int32_t>& first = n % 2 ? a : b;
    expect_close(got[0], full_forward(*model, first).back());
    expect_close(got[1], full_forward(*model, n % 2 ? b : a).back());
    if (n < tokens.size()) {
      std::vector<int32_t> next(got.size(), 77);
      std::vector<std::vector<float>> step = dec.decode(next);
      std::vector<int32_t> longer = first;
      longer.push_back(77);
      expect_close(step[0], full_forward(*model, longer).back());
    }
  }
  unsetenv("KILN_REPORT_RECOMPILES");
  EXPECT_EQ(testing::internal::GetCapturedStderr().find("recompiling"), std::string::npos);
  EXPECT_EQ(dec.num_programs(), 2u);
  EXPECT_THROW(dec.prefill({{1}, {2}, {3}, {4}}), Error);  // more prompts than rows
  EXPECT_THROW(dec.prefill({{}}), Error);
}

// A replayed decode step (recorded once, replayed per token) gives the
// plain step's bits; a second prefill's new cache is recorded anew.
TEST_P(KVCache, ReplayedDecodeGivesThePlainBits) {
  ModelConfig c = model_config(GetParam());
  c.seq_len = 16;
  auto model = build_model(c, DType::f32, 5);
  KVCacheDecoder plain(*model, 2, 16), replayed(*model, 2, 16, /*replay=*/true);
  const ReplayTotals before = replay_totals();
  for (int round = 0; round < 2; ++round) {
    const std::vector<std::vector<int32_t>> prompts = {{5, 17, 300}, {2047, 64}};
    EXPECT_EQ(replayed.prefill(prompts), plain.prefill(prompts));
    for (int32_t t = 0; t < 6; ++t) {
      const std::vector<int32_t> next = {int32_t(100 + t), t == 3 ? -1 : int32_t(200 + t)};
      ASSERT_EQ(replayed.decode(next), plain.decode(next)) << "round " << round << ", token " << t;
    }
  }
  const ReplayTotals after = replay_totals();
  EXPECT_GE(after.recordings - before.recordings, 1);
  EXPECT_GE(after.replays - before.replays, 10) << "12 decode steps, the first plain";
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
