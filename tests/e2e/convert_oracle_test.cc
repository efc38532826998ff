// `kiln convert` against transformers: the Hugging Face folder converted
// from a few steps of the llama3 debug recipe loads in transformers
// (weights, tokenizer, generation_config.json), and its mean loss on JSONL
// documents (tests/oracle/hf_eval.py) equals `kiln eval --checkpoint` of
// the run; transformers' generation config holds the run tokenizer's bos
// and eos ids.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kiln/base/error.h"
#include "kiln/data/tokenizer.h"
#include "tests/support/cli.h"
#include "tests/support/python.h"
#include "tests/support/temp_dir.h"
#include "tests/support/train_run.h"

namespace kiln::test {
namespace {

namespace fs = std::filesystem;

TEST(ConvertOracle, TransformersLoadsTheFolderWithTheCheckpointsLoss) {
  TempDir dir;
  const std::string corpus = dir / "corpus.txt", run = dir / "run", hf = dir / "hf";
  write_grammar_corpus(corpus);
  CliRun r = run_cli(debug_train_args(corpus, run, 4,
                                      "--training.local_batch_size 4 --checkpoint.enable "
                                      "--lr_scheduler.warmup_steps 2"));
  ASSERT_EQ(r.status, 0) << r.output;
  r = run_cli("convert --from " + run + " --to " + hf);
  ASSERT_EQ(r.status, 0) << r.output;

  // Documents of 1 to 12 of the corpus's sentences: shorter and longer
  // than the sequence length (32).
  std::vector<std::string> sentences;
  std::ifstream in(corpus);
  for (std::string s; sentences.size() < 18 && std::getline(in, s);) sentences.push_back(s);
  ASSERT_EQ(sentences.size(), 18u);
  std::string docs;
  size_t next = 0;
  for (size_t n : {1, 3, 12, 2}) {
    std::string text = sentences[next++];
    for (size_t i = 1; i < n; ++i) text += " " + sentences[next++];
    docs += nlohmann::json{{"text", text}}.dump() + "\n";
  }
  const std::string data = dir.write("docs.jsonl", docs);

  ASSERT_TRUE(run_oracle_script(
      "hf_eval.py", cat("--model '", hf, "' --data '", data, "' --seq-len 32 --out '",
                        dir / "loss.json", "'"),
      dir / "loss.log"));
  nlohmann::json want = nlohmann::json::parse(std::ifstream(dir / "loss.json"));
  r = run_cli("eval --checkpoint " + run + " --data " + data + " --seq-len 32 --json");
  ASSERT_EQ(r.status, 0) << r.output;
  nlohmann::json got = nlohmann::json::parse(r.output.substr(r.output.rfind('{')));
  EXPECT_EQ(got["sequences"], want["sequences"]);
  EXPECT_EQ(got["tokens"], want["tokens"]);
  EXPECT_GT(want["tokens"].get<int64_t>(), 32);
  EXPECT_NEAR(got["loss"].get<double>(), want["loss"].get<double>(), 1e-5);

  ASSERT_TRUE(run_oracle_script("hf_generation_config.py",
                                cat("--model '", hf, "' --out '", dir / "generation.json", "'"),
                                dir / "generation.log"));
  nlohmann::json generation = nlohmann::json::parse(std::ifstream(dir / "generation.json"));
  const Tokenizer tok = Tokenizer::load(run + "/tokenizer.json");
  const nlohmann::json ids = {{"bos_token_id", *bos_token_id(tok)},
                              {"eos_token_id", *eos_token_id(tok)}};
  EXPECT_EQ(generation["file"], ids);
  EXPECT_EQ(generation["model"], ids);
}

}  // namespace
}  // namespace kiln::test
