// Greedy generation against transformers' model.generate(do_sample=False)
// on the same weights, for each family: kiln decodes two prompts of
// different lengths together (one batch, padded to the decoder's bound) and
// each must draw exactly the tokens transformers draws for it alone, with
// the same log-probabilities.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "kiln/base/error.h"
#include "kiln/models/generate.h"
#include "kiln/models/hf_dir.h"
#include "tests/support/python.h"
#include "tests/support/support.h"
#include "tests/support/temp_dir.h"

namespace kiln {
namespace {

class GenerateOracle : public ::testing::TestWithParam<const char*> {};

TEST_P(GenerateOracle, GreedyEqualsTransformers) {
  ModelConfig c = model_config(GetParam());
  c.seq_len = 64;
  c.init_std = 0.3;  // peaked distributions: no near-ties for rounding to flip
  auto model = build_model(c, DType::f32, 21);
  test::TempDir dir;
  save_hf_model(*model, dir / "hf");
  const std::vector<std::vector<int32_t>> prompts = {{5, 17, 300, 2, 9, 1200, 77}, {1000, 33}};
  const int64_t n = 12;
  ASSERT_TRUE(test::run_oracle_script(
      "hf_generate.py",
      cat("--model '", dir / "hf", "' --prompts '", nlohmann::json(prompts).dump(),
          "' --max-new-tokens ", n, " --out '", dir / "hf.json", "'"),
      dir / "hf.log"));
  nlohmann::json want = nlohmann::json::parse(std::ifstream(dir / "hf.json"));

  KVCacheDecoder decoder(*model, 2, 32);
  GenerationOptions o;
  o.max_new_tokens = n;
  o.sampling.temperature = 0;
  std::vector<Completion> got = generate(decoder, prompts, o);
  for (size_t i = 0; i < prompts.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(got[i].ids, want["ids"][i].get<std::vector<int32_t>>());
    EXPECT_EQ(got[i].finish_reason, "length");
    EXPECT_TRUE(test::all_close(got[i].logprobs, want["logprobs"][i].get<std::vector<double>>(),
                                1e-4, 1e-4));
  }
}

INSTANTIATE_TEST_SUITE_P(Families, GenerateOracle,
                         ::testing::Values("llama3_debug", "qwen3_debug", "qwen3_moe_debug"));

}  // namespace
}  // namespace kiln
