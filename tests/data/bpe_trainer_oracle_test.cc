// The BPE trainer's tokenizer.json against Hugging Face `tokenizers`: HF
// loads the file kiln writes and encodes sample texts to exactly kiln's ids
// (tests/oracle/check_tokenizer.py does the HF side).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <unistd.h>

#include "kiln/data/bpe_trainer.h"
#include "kiln/data/tokenizer.h"

namespace {

namespace fs = std::filesystem;

fs::path assets() { return fs::path(KILN_SOURCE_DIR) / ".." / "shared" / "assets"; }

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A corpus: the Austen novels when the shared assets are here, else made-up
// words over a mixed alphabet, so the test never depends on them.
std::string corpus() {
  std::string text;
  if (fs::is_directory(assets() / "corpus"))
    for (const char* name : {"emma.txt", "persuasion.txt"}) text += read(assets() / "corpus" / name).substr(0, 400000);
  std::mt19937 rng(7);
  const char* syllables[] = {"ka", "lo", "mi", "the", "an", "é", "ß", "дом", "水", "ing", " ", " ", ", ", ".\n", "'s",
                             "42", "\n\n", "  ", "🦙", "<|endoftext|>"};
  for (int i = 0; i < 200000; ++i) text += syllables[rng() % std::size(syllables)];
  return text;
}

std::vector<std::string> samples(const std::string& corpus) {
  std::vector<std::string> out = {
      "", " ", "Hello, world!", "It's 12345 o'clock, WE'LL see.", "naïve café — 東京 🦙",
      "a<|endoftext|>b<|endoftext|>", "<|pad|>x", "  leading and trailing  ", "tabs\t\tand\r\nlines\n\n\n",
      "emoji 👨‍👩‍👧 and ❤️", "code: for (int i = 0; i < n; ++i) { x += i; }", "Привет мир", "١٢٣٤ ²³",
  };
  for (size_t i = 0; i + 2000 < corpus.size() && out.size() < 80; i += corpus.size() / 60) {
    size_t start = corpus.find('\n', i);
    if (start == std::string::npos) break;
    out.push_back(corpus.substr(start + 1, 1500));
  }
  return out;
}

// Cuts s to a valid UTF-8 prefix (the samples above cut at byte offsets).
std::string valid_prefix(std::string s) {
  while (!s.empty() && (static_cast<unsigned char>(s.back()) & 0xC0) == 0x80) s.pop_back();
  if (!s.empty() && static_cast<unsigned char>(s.back()) >= 0xC0) s.pop_back();
  return s;
}

TEST(BpeTrainerOracle, HuggingFaceLoadsTheFileAndEncodesIdentically) {
  fs::path dir = fs::temp_directory_path() / ("kiln_bpe_trainer_test_" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::string text = corpus();
  std::ofstream(dir / "corpus.txt", std::ios::binary) << text;

  kiln::BpeTrainerOptions opt;
  opt.vocab_size = 3000;
  opt.special_tokens = {"<|endoftext|>", "<|pad|>"};
  kiln::BpeTrainer trainer(opt);
  trainer.add_file((dir / "corpus.txt").string());
  kiln::BpeTrainer::Result r = trainer.train();
  EXPECT_EQ(r.vocab_size, 3000);
  EXPECT_GE(r.merges, 3000 - 258);
  std::ofstream(dir / "tokenizer.json") << r.json;

  kiln::Tokenizer tok = kiln::Tokenizer::load((dir / "tokenizer.json").string());
  EXPECT_EQ(tok.vocab_size(), 3000);
  EXPECT_EQ(tok.token_to_id("<|endoftext|>"), 0);
  EXPECT_TRUE(tok.is_special(1));

  std::vector<std::string> texts = samples(text);
  {
    std::ofstream f(dir / "texts.jsonl");
    for (std::string& t : texts) {
      t = valid_prefix(t);
      f << nlohmann::json{{"text", t}}.dump() << "\n";
    }
  }
  std::string cmd = std::string(KILN_PYTHON) + " " + KILN_SOURCE_DIR + "/tests/oracle/check_tokenizer.py --tokenizer " +
                    (dir / "tokenizer.json").string() + " --texts " + (dir / "texts.jsonl").string() + " --out " +
                    (dir / "hf.jsonl").string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;

  std::ifstream hf(dir / "hf.jsonl");
  std::string line;
  size_t n = 0;
  for (; std::getline(hf, line); ++n) {
    ASSERT_LT(n, texts.size());
    auto j = nlohmann::json::parse(line);
    std::vector<int32_t> ids = tok.encode(texts[n]);
    EXPECT_EQ(ids, j.at("ids").get<std::vector<int32_t>>()) << "text " << n << ": " << nlohmann::json(texts[n]).dump();
    EXPECT_EQ(tok.decode(ids), j.at("text").get<std::string>()) << "text " << n;
    EXPECT_EQ(tok.decode(ids), texts[n]) << "text " << n;
  }
  EXPECT_EQ(n, texts.size());
  // Training is deterministic: the same input gives the same file.
  kiln::BpeTrainer again(opt);
  again.add_text(text);
  EXPECT_EQ(again.train().json, r.json);
  fs::remove_all(dir);
}

}  // namespace
