// `kiln data prepare` run as a user would: shards written with their
// meta.json, and one-line errors with a non-zero exit for bad input.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/support/cli.h"
#include "tests/support/temp_dir.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

TEST(DataCli, PrepareWritesShards) {
  test::TempDir dir;
  std::string text;
  for (int i = 0; i < 200; ++i) text += "fortune number " + std::to_string(i) + "\n%\n";
  std::string corpus = dir.write("in/corpus.txt", text);
  auto tr = test::run_cli("tokenizer train --input " + corpus + " --vocab-size 300 --output " +
                          (dir / "tok.json"));
  ASSERT_EQ(tr.status, 0) << tr.output;
  auto r = test::run_cli("data prepare --tokenizer " + (dir / "tok.json") + " --input " +
                         dir.path() + "/in --output " + (dir / "shards") +
                         " --text-split delimiter --val-fraction 0.1");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("180 training documents"), std::string::npos) << r.output;
  std::ifstream meta(dir / "shards/meta.json");
  auto j = nlohmann::json::parse(meta);
  EXPECT_EQ(j["documents"]["val"], 20);
  for (const auto& f : j["train"]) EXPECT_TRUE(fs::exists(dir / ("shards/" + f.get<std::string>())));

  // Training on them: with their tokenizer, and without one (which needs it
  // named, not a tokenizer learned from the shards' bytes).
  const std::string train = "train --config llama3_debug --training.steps 2 --training.seq_len 16 "
                            "--training.local_batch_size 2 --checkpoint.enable=false --data.path " +
                            (dir / "shards") + " --job.dump_folder " + (dir / "run");
  auto t = test::run_cli(train + " --model.tokenizer_path " + (dir / "tok.json"));
  EXPECT_EQ(t.status, 0) << t.output;
  t = test::run_cli(train);
  EXPECT_NE(t.status, 0) << t.output;
  EXPECT_NE(t.output.find("holds token shards, which need the tokenizer they were made with: set "
                          "--model.tokenizer_path"),
            std::string::npos)
      << t.output;
  t = test::run_cli(train + " --data.format shards --data.path " + corpus);
  EXPECT_NE(t.status, 0) << t.output;
  EXPECT_NE(t.output.find("data.format shards: token shards need the tokenizer they were made "
                          "with"),
            std::string::npos)
      << t.output;
  // A pipe is refused, not opened: that would wait for a writer for ever.
  ASSERT_EQ(::mkfifo((dir / "pipe").c_str(), 0600), 0);
  t = test::run_cli(train + " --data.path " + (dir / "pipe"));
  EXPECT_NE(t.status, 0) << t.output;
  EXPECT_NE(t.output.find("is neither a file nor a folder (a device, pipe or socket)"),
            std::string::npos)
      << t.output;
  // A tokenizer learned from other text is refused.
  auto other = test::run_cli("tokenizer train --input " +
                             dir.write("other.txt", "quite other words: zebra yak quokka\n") +
                             " --vocab-size 300 --output " + (dir / "other.json"));
  ASSERT_EQ(other.status, 0) << other.output;
  t = test::run_cli(train + " --model.tokenizer_path " + (dir / "other.json"));
  EXPECT_NE(t.status, 0) << t.output;
  EXPECT_NE(t.output.find("were prepared with "), std::string::npos) << t.output;
  EXPECT_NE(t.output.find("use the tokenizer the shards were prepared with"), std::string::npos)
      << t.output;
}

// The JSONL key is --text-key, as kiln train's data.text_key (its first
// name, --text-field, still works).
TEST(DataCli, PrepareReadsTheJsonlKeyNamedByTextKey) {
  test::TempDir dir;
  std::string lines;
  for (int i = 0; i < 50; ++i)
    lines += "{\"content\": \"line " + std::to_string(i) + " of text\"}\n";
  std::string corpus = dir.write("in/corpus.jsonl", lines);
  auto tr = test::run_cli("tokenizer train --input " +
                          dir.write("t.txt", "line of text 0123456789\n") +
                          " --vocab-size 300 --output " + (dir / "tok.json"));
  ASSERT_EQ(tr.status, 0) << tr.output;
  const std::string prepare = "data prepare --tokenizer " + (dir / "tok.json") +
                              " --input " + corpus + " --val-fraction 0 --output ";
  for (const char* flag : {"--text-key", "--text-field"}) {
    auto r = test::run_cli(prepare + (dir / flag) + " " + flag + " content");
    EXPECT_EQ(r.status, 0) << r.output;
    EXPECT_NE(r.output.find("50 training documents"), std::string::npos) << r.output;
  }
  auto r = test::run_cli(prepare + (dir / "default"));
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("--text-key for kiln data prepare"), std::string::npos) << r.output;
}

TEST(DataCli, ErrorsAreOneLine) {
  test::TempDir dir;
  std::string tok = dir / "tok.json";
  auto tr = test::run_cli("tokenizer train --input " + dir.write("c.txt", "abc abc") +
                          " --vocab-size 260 --output " + tok);
  ASSERT_EQ(tr.status, 0) << tr.output;
  struct Case {
    std::string args, expect;
  };
  const Case cases[] = {
      {"--input " + (dir / "missing") + " --output " + (dir / "o"), "does not exist"},
      {"--input " + dir.write("bad.txt", "\xff\xfe") + " --output " + (dir / "o"), "invalid UTF-8"},
      {"--input " + dir.write("empty.txt", "") + " --output " + (dir / "o"), "no text"},
      {"--input " + (dir / "c.txt") + " --output " + (dir / "o") + " --text-split words",
       "unknown text split"},
  };
  for (const auto& c : cases) {
    auto r = test::run_cli("data prepare --tokenizer " + tok + " " + c.args);
    EXPECT_NE(r.status, 0) << c.args;
    EXPECT_NE(r.output.find(c.expect), std::string::npos) << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  }
  EXPECT_FALSE(fs::exists(dir / "o"));
}

}  // namespace
}  // namespace kiln
