// The BPE trainer on inputs small enough to train by hand, and its errors.
// (bpe_trainer_oracle_test checks its files against Hugging Face.)
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "kiln/base/error.h"
#include "kiln/data/bpe_trainer.h"
#include "kiln/data/tokenizer.h"
#include "tests/support/support.h"

namespace {

using kiln::test::error_of;

TEST(BpeTrainer, MergesTheMostFrequentPairFirst) {
  // One pre-token "aaabdaaabac": pairs aa x4, ab x2, ... so "a a" first; then
  // "aa a" and "a b" both occur twice and the tie goes to the smaller ids
  // (a=97, b=98 before aa=256).
  kiln::BpeTrainerOptions opt;
  opt.vocab_size = 258;
  kiln::BpeTrainer t(opt);
  t.add_text("aaabdaaabac");
  kiln::BpeTrainer::Result r = t.train();
  auto j = nlohmann::json::parse(r.json);
  EXPECT_EQ(j["model"]["merges"], nlohmann::json::parse(R"([["a","a"],["a","b"]])"));
  EXPECT_EQ(j["model"]["vocab"]["aa"], 256);
  EXPECT_EQ(j["model"]["vocab"]["ab"], 257);
  EXPECT_EQ(r.vocab_size, 258);
  kiln::Tokenizer tok = kiln::Tokenizer::from_json_text(r.json, "trained");
  EXPECT_EQ(tok.encode("aaabdaaabac"), (std::vector<int32_t>{256, 257, 'd', 256, 257, 'a', 'c'}));
}

TEST(BpeTrainer, SpecialTokensComeFirstAndAreNotLearnedFrom) {
  kiln::BpeTrainerOptions opt;
  opt.vocab_size = 1000;
  opt.special_tokens = {"<|endoftext|>"};
  kiln::BpeTrainer t(opt);
  t.add_text("xy<|endoftext|>xy<|endoftext|>xy");
  kiln::BpeTrainer::Result r = t.train();
  EXPECT_EQ(r.merges, 1);  // only "x y" is seen twice; "|e", "nd", ... are never counted
  EXPECT_EQ(r.vocab_size, 1 + 256 + 1);
  kiln::Tokenizer tok = kiln::Tokenizer::from_json_text(r.json, "trained");
  EXPECT_EQ(tok.encode("xy<|endoftext|>"), (std::vector<int32_t>{257, 0}));
  EXPECT_EQ(tok.decode(std::vector<int32_t>{257, 0}), "xy<|endoftext|>");
}

TEST(BpeTrainer, BadOptionsAndInputsAreClearErrors) {
  kiln::BpeTrainerOptions opt;
  opt.vocab_size = 100;
  EXPECT_NE(error_of([&] { kiln::BpeTrainer t(opt); }).find("at least 256"), std::string::npos);
  opt.vocab_size = 300;
  opt.special_tokens = {"<s>", "<s>"};
  EXPECT_NE(error_of([&] { kiln::BpeTrainer t(opt); }).find("twice"), std::string::npos);
  opt.special_tokens = {};
  kiln::BpeTrainer t(opt);
  EXPECT_NE(error_of([&] { t.train(); }).find("no text"), std::string::npos);
  EXPECT_NE(error_of([&] { t.add_file("/nonexistent/corpus.txt"); }).find("/nonexistent/corpus.txt"),
            std::string::npos);
  EXPECT_NE(error_of([&] { t.add_text("ok \xFF", "input.txt"); }).find("input.txt: not valid UTF-8 at byte 3"),
            std::string::npos);
}

}  // namespace
