// `kiln tokenizer` run as a user would: train, encode, --jsonl, decode, and
// the errors for bad files and bad input.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/support/temp_dir.h"

namespace {

namespace fs = std::filesystem;

struct CliRun {
  int status;
  std::string out;  // stdout
  std::string err;  // stderr
};

class TokenizerCli : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = temp_.path(); }

  fs::path write(const std::string& name, const std::string& contents) {
    std::ofstream(dir_ / name, std::ios::binary) << contents;
    return dir_ / name;
  }
  static std::string read(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    std::ostringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  // Runs `kiln <args>` with `input` on stdin.
  CliRun kiln(const std::string& args, const std::string& input = "") {
    const char* cli = std::getenv("KILN_CLI");
    EXPECT_NE(cli, nullptr) << "KILN_CLI is set by ctest";
    fs::path in = write("stdin", input);
    std::string cmd = std::string(cli ? cli : "kiln") + " " + args + " < " + in.string() + " > " +
                      (dir_ / "stdout").string() + " 2> " + (dir_ / "stderr").string();
    int status = std::system(cmd.c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read(dir_ / "stdout"), read(dir_ / "stderr")};
  }
  // A tokenizer trained by the CLI on a made-up corpus.
  fs::path trained() {
    std::mt19937 rng(3);
    const char* words[] = {"the", "cat", "sat", "on", "mat", "été", "水", "42", "don't", "🦙"};
    std::string text;
    for (int i = 0; i < 20000; ++i) text += std::string(words[rng() % std::size(words)]) + (i % 13 ? " " : ".\n");
    fs::path corpus = write("corpus.txt", text);
    CliRun r = kiln("tokenizer train --input " + corpus.string() + " --vocab-size 280 --special '<|endoftext|>' --output " +
                    (dir_ / "tok.json").string());
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("280 tokens"), std::string::npos) << r.err;
    return dir_ / "tok.json";
  }

  kiln::test::TempDir temp_;
  fs::path dir_;
};

TEST_F(TokenizerCli, TrainEncodeDecodeRoundTrip) {
  fs::path tok = trained();
  std::string text = "the cat sat on the mat, don't you know? 水 été 🦙<|endoftext|>\n";
  CliRun enc = kiln("tokenizer encode --tokenizer " + tok.string(), text);
  ASSERT_EQ(enc.status, 0) << enc.err;
  auto ids = nlohmann::json::parse(enc.out);
  ASSERT_TRUE(ids.is_array());
  EXPECT_LT(ids.size(), text.size() / 2);  // words the corpus repeats became single tokens
  EXPECT_EQ(ids[ids.size() - 2], 0) << enc.out;  // <|endoftext|> is one special token, id 0
  CliRun dec = kiln("tokenizer decode --tokenizer " + tok.string(), enc.out);
  ASSERT_EQ(dec.status, 0) << dec.err;
  EXPECT_EQ(dec.out, text);
  dec = kiln("tokenizer decode --skip-special --tokenizer " + tok.string(), enc.out);
  EXPECT_EQ(dec.out, "the cat sat on the mat, don't you know? 水 été 🦙\n");
}

TEST_F(TokenizerCli, EncodeMatchesTheLlama3Golden) {
  fs::path assets = fs::path(KILN_SOURCE_DIR) / ".." / "shared" / "assets" / "tokenizers";
  if (!fs::is_directory(assets)) GTEST_SKIP() << "no shared assets here";
  std::string tok = (assets / "llama3" / "tokenizer.json").string();
  // The first cases of the golden file, as plain stdin and as JSONL.
  std::ifstream golden(assets / "golden_llama3.jsonl");
  std::vector<nlohmann::json> cases;
  std::string line, jsonl;
  while (cases.size() < 20 && std::getline(golden, line)) {
    cases.push_back(nlohmann::json::parse(line));
    jsonl += nlohmann::json{{"text", cases.back()["text"]}}.dump() + "\n";
  }
  CliRun r = kiln("tokenizer encode --tokenizer " + tok, cases[12]["text"].get<std::string>());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out), cases[12]["ids"]);

  r = kiln("tokenizer encode --jsonl --tokenizer " + tok, jsonl);
  ASSERT_EQ(r.status, 0) << r.err;
  std::istringstream out(r.out);
  size_t n = 0;
  for (; std::getline(out, line); ++n) {
    ASSERT_LT(n, cases.size());
    EXPECT_EQ(nlohmann::json::parse(line), (nlohmann::json{{"ids", cases[n]["ids"]}})) << "line " << n + 1;
  }
  EXPECT_EQ(n, cases.size());
}

TEST_F(TokenizerCli, BadFilesAndInputAreOneLineErrors) {
  fs::path tok = trained();
  std::string json = read(tok);
  fs::path cut = write("cut.json", json.substr(0, json.size() / 3));
  CliRun r = kiln("tokenizer encode --tokenizer " + cut.string(), "hello");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("cut.json: not valid JSON"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "one line: " << r.err;
  EXPECT_TRUE(r.out.empty());

  r = kiln("tokenizer encode --tokenizer " + (dir_ / "missing.json").string(), "hello");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("missing.json: no such file"), std::string::npos) << r.err;

  r = kiln("tokenizer encode --jsonl --tokenizer " + tok.string(), "{\"text\": \"ok\"}\n{\"txt\": 1}\n");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("stdin line 2"), std::string::npos) << r.err;

  r = kiln("tokenizer encode --tokenizer " + tok.string(), "bad \xFF byte");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("not valid UTF-8"), std::string::npos) << r.err;

  r = kiln("tokenizer encode --train-on all --tokenizer " + tok.string(), "hello");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--train-on requires --chat"), std::string::npos) << r.err;

  r = kiln("tokenizer decode --tokenizer " + tok.string(), "[1, 2, 99999]");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("99999"), std::string::npos) << r.err;
  // The largest JSON integer is reported as given, not wrapped to -1.
  r = kiln("tokenizer decode --tokenizer " + tok.string(), "[18446744073709551615]");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("token id 18446744073709551615 is outside the vocabulary"), std::string::npos)
      << r.err;

  r = kiln("tokenizer train --input " + (dir_ / "nothing.txt").string() + " --vocab-size 300 --output " +
           (dir_ / "x.json").string());
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("nothing.txt' does not exist"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "x.json"));
  // A pipe is refused, not opened: that would wait for a writer for ever.
  ASSERT_EQ(::mkfifo((dir_ / "pipe").c_str(), 0600), 0);
  r = kiln("tokenizer train --input " + (dir_ / "pipe").string() + " --vocab-size 300 --output " +
           (dir_ / "x.json").string());
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("is neither a file nor a folder"), std::string::npos) << r.err;
  r = kiln("tokenizer train --input " + tok.string() + " --vocab-size 0 --output " +
           (dir_ / "x.json").string());
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("--vocab-size: Value 0 not in range 1 to"), std::string::npos) << r.err;
  // A folder in the output's place stays as it was, with no temporary file beside it.
  fs::create_directories(dir_ / "out");
  r = kiln("tokenizer train --input " + tok.string() + " --vocab-size 300 --output " +
           (dir_ / "out").string());
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("Is a directory"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::is_empty(dir_ / "out"));
  for (const auto& e : fs::directory_iterator(dir_))
    EXPECT_FALSE(e.path().filename().string().starts_with("out.")) << e.path();
}

}  // namespace
