// Chat fine-tuning as a user runs it: `kiln train --data.format chat` on a
// JSONL of conversations the test writes (Qwen3's tokenizer and template)
// trains on the assistant tokens only, lowers that loss over 30 steps,
// reports the step's targets, answers a chat prompt, resumes from a checkpoint with exactly the
// losses of the uninterrupted run, and exports a Hugging Face folder that
// transformers loads: its loss on text, and its loss on the assistant
// tokens of conversations, equal `kiln eval`'s.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kiln/base/error.h"
#include "tests/support/cli.h"
#include "tests/support/python.h"
#include "tests/support/temp_dir.h"
#include "tests/support/train_run.h"

namespace kiln::test {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

const fs::path kQwen3 = fs::path(KILN_SOURCE_DIR) / ".." / "shared" / "assets" / "tokenizers" / "qwen3";

// Arithmetic questions and answers, a third with a system prompt.
std::string conversations(int n) {
  std::string out;
  uint32_t x = 12345;
  auto next = [&] { return (x = x * 1103515245u + 12345u) >> 16 & 15; };
  for (int i = 0; i < n; ++i) {
    const uint32_t a = next(), b = next();
    json m = json::array();
    if (i % 3 == 0) m.push_back({{"role", "system"}, {"content", "Answer briefly."}});
    m.push_back({{"role", "user"}, {"content", cat("What is ", a, " plus ", b, "?")}});
    m.push_back({{"role", "assistant"}, {"content", cat(a, " plus ", b, " is ", a + b, ".")}});
    out += json{{"messages", m}}.dump() + "\n";
  }
  return out;
}

TEST(SftE2E, ChatFineTuneTrainsOnAnswersResumesExactlyAndExports) {
  ASSERT_TRUE(fs::exists(kQwen3)) << "missing ../shared/assets";
  TempDir dir;
  const std::string data = dir.write("chat.jsonl", conversations(200));
  auto args = [&](const std::string& dump) {
    return cat("train --config qwen3_debug --data.format chat --data.path ", data,
               " --model.tokenizer_path ", kQwen3.string(),
               " --model.vocab_size 151936 --training.seq_len 48 --training.local_batch_size 4"
               " --training.steps 30 --lr_scheduler.warmup_steps 2 --metrics.log_freq 1"
               " --checkpoint.enable --checkpoint.interval 15 --checkpoint.last_save_in_hf"
               " --job.dump_folder ",
               dump);
  };
  const std::string whole = dir / "whole";
  CliRun run = run_cli(args(whole));
  ASSERT_EQ(run.status, 0) << run.output;
  std::vector<json> m = read_metrics(whole);
  ASSERT_EQ(m.size(), 30u);
  std::vector<double> losses = read_losses(whole);
  EXPECT_LT(losses.back(), 0.7 * losses.front()) << "the assistant tokens' loss should fall";
  for (const json& step : m) {
    // Answers are a few tokens of each ~30-token conversation.
    ASSERT_TRUE(step.contains("targets")) << step.dump();
    EXPECT_GT(step["targets"].get<int64_t>(), 0);
    EXPECT_LT(step["targets"].get<int64_t>(), 4 * 48 / 2);
  }

  // A chat reply from the checkpoint: the template's prompt, and a stop at
  // the end of the assistant's turn or the token limit.
  const std::string prompts = dir.write(
      "prompts.jsonl", R"({"messages": [{"role": "user", "content": "What is 3 plus 4?"}]})" "\n"
                       R"({"prompt": "What is 1 plus 1?"})" "\n");
  run = run_cli(cat("generate --checkpoint ", whole, " --chat --prompts ", prompts,
                    " --temperature 0 --max-new-tokens 12 --output ids"));
  ASSERT_EQ(run.status, 0) << run.output;
  for (const char* index : {"\"index\":0", "\"index\":1"})
    EXPECT_NE(run.output.find(index), std::string::npos) << run.output;

  // The same run cut after its step-15 checkpoint continues exactly.
  const std::string cut = dir / "cut";
  fs::copy(whole, cut, fs::copy_options::recursive);
  fs::remove_all(fs::path(cut) / "checkpoint" / "step-30");
  run = run_cli(args(cut));
  ASSERT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("step 15)"), std::string::npos) << run.output;
  EXPECT_EQ(read_losses(cut), losses);

  // The exported folder in transformers and in kiln eval.
  const std::string hf = (fs::path(whole) / "hf").string();
  const std::string docs = dir.write(
      "docs.jsonl", "{\"text\": \"What is 3 plus 4? 3 plus 4 is 7.\"}\n{\"text\": \"Answer briefly.\"}\n");
  ASSERT_TRUE(run_oracle_script(
      "hf_eval.py", cat("--model ", hf, " --data ", docs, " --seq-len 48 --out ", dir / "hf.json"),
      dir / "hf.log"));
  json want = json::parse(std::ifstream(dir / "hf.json"));
  run = run_cli(cat("eval --hf ", hf, " --data ", docs, " --seq-len 48 --json"));
  ASSERT_EQ(run.status, 0) << run.output;
  json got = json::parse(run.output.substr(run.output.rfind('{')));
  EXPECT_EQ(got["tokens"], want["tokens"]);
  EXPECT_NEAR(got["loss"].get<double>(), want["loss"].get<double>(), 1e-5);

  // The masked loss on conversations: `kiln eval --format chat` against
  // transformers given the ids and labels `kiln tokenizer encode --chat` prints.
  const std::string chats = dir.write("eval_chat.jsonl", conversations(7));
  run = run_cli(cat("tokenizer encode --tokenizer ", kQwen3.string(), " --chat --jsonl < ", chats,
                    " > ", dir / "labels.jsonl"));
  ASSERT_EQ(run.status, 0) << run.output;
  ASSERT_TRUE(run_oracle_script("hf_eval.py", cat("--model ", hf, " --data ", dir / "labels.jsonl",
                                                         " --seq-len 48 --out ", dir / "masked.json"),
                                dir / "masked.log"));
  want = json::parse(std::ifstream(dir / "masked.json"));
  run = run_cli(cat("eval --hf ", hf, " --data ", chats, " --format chat --seq-len 48 --json"));
  ASSERT_EQ(run.status, 0) << run.output;
  got = json::parse(run.output.substr(run.output.rfind('{')));
  EXPECT_EQ(got["tokens"], want["tokens"]);
  EXPECT_NEAR(got["loss"].get<double>(), want["loss"].get<double>(), 1e-5);
}

}  // namespace
}  // namespace kiln::test
