// `kiln eval --hf DIR --data docs.jsonl` against transformers: each JSONL
// document is one sequence (tokenized as tokenizer(text) does, truncated to
// --seq-len + 1 tokens, never packed with another), and the mean loss over
// every target equals transformers' float64 cross-entropy over the same
// documents, for a Llama 3 model with the Llama 3 tokenizer and a Qwen3
// model with Qwen3's. Documents of different lengths share one batch shape.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kiln/base/error.h"
#include "kiln/models/hf_dir.h"
#include "tests/support/cli.h"
#include "tests/support/python.h"
#include "tests/support/support.h"
#include "tests/support/temp_dir.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

const fs::path kAssets = fs::path(KILN_SOURCE_DIR) / ".." / "shared" / "assets";

struct Case {
  const char* family;
  const char* tokenizer;
  int64_t vocab;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.family << " with the " << c.tokenizer << " tokenizer";
}

class EvalOracle : public ::testing::TestWithParam<Case> {};

TEST_P(EvalOracle, DocumentLossEqualsTransformers) {
  const Case& k = GetParam();
  ASSERT_TRUE(fs::exists(kAssets / "tokenizers" / k.tokenizer)) << "missing ../shared/assets";
  ModelConfig c = model_config(k.family);
  c.vocab_size = k.vocab;
  c.seq_len = 48;
  auto model = build_model(c, DType::f32, 9);
  test::TempDir dir;
  const std::string hf = dir / "hf";
  save_hf_model(*model, hf);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    fs::copy_file(kAssets / "tokenizers" / k.tokenizer / f, fs::path(hf) / f);
  // Lengths from one token to past the sequence length.
  std::ifstream novel(kAssets / "corpus" / "persuasion.txt");
  std::string text((std::istreambuf_iterator<char>(novel)), {});
  std::string docs;
  for (size_t n : {1, 40, 7, 300, 90, 2, 1000, 25, 160})
    docs += nlohmann::json{{"text", text.substr(5000 + n * 13, n)}}.dump() + "\n";
  const std::string data = dir.write("docs.jsonl", docs);

  ASSERT_TRUE(test::run_oracle_script(
      "hf_eval.py", cat("--model '", hf, "' --data '", data, "' --seq-len 40 --out '",
                        dir / "hf.json", "'"),
      dir / "hf.log"));
  nlohmann::json want = nlohmann::json::parse(std::ifstream(dir / "hf.json"));
  test::CliRun run = test::run_cli(cat("eval --hf '", hf, "' --data '", data,
                                       "' --seq-len 40 --batch-size 4 --json"));
  ASSERT_EQ(run.status, 0) << run.output;
  nlohmann::json got = nlohmann::json::parse(run.output.substr(run.output.rfind('{')));
  EXPECT_EQ(got["tokens"], want["tokens"]);
  EXPECT_EQ(got["sequences"], want["sequences"]);
  EXPECT_NEAR(got["loss"].get<double>(), want["loss"].get<double>(), 1e-5);
  const double ppl = std::exp(want["loss"].get<double>());
  EXPECT_NEAR(got["perplexity"].get<double>(), ppl, 1e-6 * ppl);
}

INSTANTIATE_TEST_SUITE_P(Families, EvalOracle,
                         ::testing::Values(Case{"llama3_debug", "llama3", 128256},
                                           Case{"qwen3_debug", "qwen3", 151936}),
                         [](const auto& info) { return std::string(info.param.tokenizer); });

}  // namespace
}  // namespace kiln
