// kiln's tokenizer against references it does not compute itself: the golden
// ids of Llama 3 and Qwen3 (written by an independent implementation), GPT-2
// ids and pre-tokenizer splits from Hugging Face `tokenizers`, and small BPE
// cases derived by hand from the merge ranks.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>
#include <unistd.h>

#include "kiln/base/error.h"
#include "kiln/data/pretokenize.h"
#include "kiln/data/tokenizer.h"
#include "kiln/data/utf8.h"
#include "tests/support/support.h"

namespace {

using kiln::test::error_of;

namespace fs = std::filesystem;
using kiln::Tokenizer;
using Ids = std::vector<int32_t>;

fs::path assets() { return fs::path(KILN_SOURCE_DIR) / ".." / "shared" / "assets"; }

#define REQUIRE_ASSETS()                                                        \
  if (!fs::is_directory(assets())) GTEST_SKIP() << "no " << assets() << " here"

fs::path temp_dir() { return fs::temp_directory_path() / ("kiln_tokenizer_test_" + std::to_string(getpid())); }

fs::path temp_file(const std::string& name, const std::string& contents) {
  fs::create_directories((temp_dir() / name).parent_path());
  std::ofstream(temp_dir() / name, std::ios::binary) << contents;
  return temp_dir() / name;
}

// Every golden case encodes to its ids and decodes back to its text.
void check_golden(const std::string& family) {
  Tokenizer tok = Tokenizer::load((assets() / "tokenizers" / family / "tokenizer.json").string());
  std::ifstream in(assets() / "tokenizers" / ("golden_" + family + ".jsonl"));
  ASSERT_TRUE(in) << "missing golden file for " << family;
  std::string line;
  int cases = 0, wrong = 0;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    std::string text = j.at("text");
    Ids want = j.at("ids").get<Ids>();
    ++cases;
    Ids got = tok.encode(text);
    if (got != want && ++wrong <= 5) ADD_FAILURE() << family << ": encode(" << nlohmann::json(text).dump() << ") differs";
    EXPECT_EQ(tok.decode(want), text) << family << " case " << cases;
  }
  EXPECT_EQ(wrong, 0) << family << ": " << wrong << " of " << cases << " cases encode differently";
  EXPECT_GE(cases, 1000) << family;
}

TEST(TokenizerGolden, Llama3) {
  REQUIRE_ASSETS();
  check_golden("llama3");
}

TEST(TokenizerGolden, Qwen3) {
  REQUIRE_ASSETS();
  check_golden("qwen3");
}

TEST(TokenizerGpt2, VocabAndMergesGiveHuggingFaceIds) {
  REQUIRE_ASSETS();
  fs::path dir = assets() / "tokenizers" / "gpt2";
  Tokenizer tok = Tokenizer::from_gpt2_files((dir / "vocab.json").string(), (dir / "merges.txt").string());
  EXPECT_EQ(tok.encode("Hello world"), (Ids{15496, 995}));
  EXPECT_EQ(tok.encode("It's a truth universally acknowledged, that a single man"),
            (Ids{1026, 338, 257, 3872, 26208, 10810, 11, 326, 257, 2060, 582}));
  EXPECT_EQ(tok.encode("x<|endoftext|>y"), (Ids{87, 50256, 88}));
  EXPECT_TRUE(tok.is_special(50256));
  EXPECT_EQ(Tokenizer::load(dir.string()).encode("Hello world"), (Ids{15496, 995}));  // the folder form
  for (std::string text : {"Emma Woodhouse, handsome, clever, and rich,\n\twith 3 homes & 12,345 acres.",
                           "naïve café — 東京 🦙 \r\n  ", "", " ", "<|endoftext|>"})
    EXPECT_EQ(tok.decode(tok.encode(text)), text);
  EXPECT_EQ(tok.decode(tok.encode("a<|endoftext|>b"), /*skip_special_tokens=*/true), "ab");
}

// The three split patterns, against Hugging Face's own Split pre-tokenizer.
TEST(PreTokenize, PatternsSplitAsTheRegexes) {
  using kiln::data::SplitPattern;
  auto pieces = [](SplitPattern p, std::string_view s) {
    std::vector<std::string_view> v;
    kiln::data::split(p, s, v);
    return std::vector<std::string>(v.begin(), v.end());
  };
  using V = std::vector<std::string>;
  std::string s1 = "Hello, world! It's 12345 ok";
  EXPECT_EQ(pieces(SplitPattern::gpt2, s1), (V{"Hello", ",", " world", "!", " It", "'s", " 12345", " ok"}));
  EXPECT_EQ(pieces(SplitPattern::llama3, s1), (V{"Hello", ",", " world", "!", " It", "'s", " ", "123", "45", " ok"}));
  EXPECT_EQ(pieces(SplitPattern::qwen2, s1),
            (V{"Hello", ",", " world", "!", " It", "'s", " ", "1", "2", "3", "4", "5", " ok"}));
  std::string s2 = "a  b\n\n  c ";
  EXPECT_EQ(pieces(SplitPattern::gpt2, s2), (V{"a", " ", " b", "\n\n ", " c", " "}));
  EXPECT_EQ(pieces(SplitPattern::llama3, s2), (V{"a", " ", " b", "\n\n", " ", " c", " "}));
  std::string s3 = "WE'LL x'S 'd";  // contractions are case-insensitive only in Llama 3 / Qwen
  EXPECT_EQ(pieces(SplitPattern::gpt2, s3), (V{"WE", "'", "LL", " x", "'", "S", " '", "d"}));
  EXPECT_EQ(pieces(SplitPattern::llama3, s3), (V{"WE", "'LL", " x", "'S", " '", "d"}));
  std::string s4 = "été ١٢٣٤ \u3000x";  // Arabic-Indic digits are \p{N}; U+3000 is \s
  EXPECT_EQ(pieces(SplitPattern::gpt2, s4), (V{"été", " ١٢٣٤", " ", "\u3000", "x"}));
  EXPECT_EQ(pieces(SplitPattern::llama3, s4), (V{"été", " ", "١٢٣", "٤", " ", "\u3000x"}));
  EXPECT_EQ(pieces(SplitPattern::qwen2, s4), (V{"été", " ", "١", "٢", "٣", "٤", " ", "\u3000x"}));
  std::string s5 = "x\r\n\ty  ";
  EXPECT_EQ(pieces(SplitPattern::gpt2, s5), (V{"x", "\r\n", "\t", "y", "  "}));
  EXPECT_EQ(pieces(SplitPattern::llama3, s5), (V{"x", "\r\n", "\ty", "  "}));
}

// A tokenizer.json small enough to work out by hand.
std::string tiny_json(bool ignore_merges, const std::string& added_tokens = "[]",
                      const std::string& normalizer = "null",
                      const std::string& post_processor = "null") {
  std::string regex = std::string(kiln::data::split_regex(kiln::data::SplitPattern::llama3));
  return R"({"version":"1.0","added_tokens":)" + added_tokens + R"(,"normalizer":)" + normalizer +
         R"(,"pre_tokenizer":{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":)" +
         nlohmann::json(regex).dump() +
         R"(},"behavior":"Isolated","invert":false},{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":false}]},
    "post_processor":)" + post_processor + R"(,"decoder":{"type":"ByteLevel"},
    "model":{"type":"BPE","dropout":null,"unk_token":null,"fuse_unk":false,"byte_fallback":false,"ignore_merges":)" +
         (ignore_merges ? "true" : "false") + R"(,
      "vocab":{"a":0,"b":1,"c":2,"Ġ":3,"bc":4,"ab":5,"abc":6,"Ġa":7,"ca":8,"Ġabc":9},
      "merges":[["b","c"],["a","b"],["a","bc"],["Ġ","a"],["Ġa","bc"]]}})";
}

TEST(TokenizerBpe, MergesByRankAndIgnoreMerges) {
  Tokenizer tok = Tokenizer::from_json_text(tiny_json(false), "tiny");
  // "abc": b+c has rank 0 and goes first, then a+bc.
  EXPECT_EQ(tok.encode("abc"), (Ids{6}));
  EXPECT_EQ(tok.encode("abab"), (Ids{5, 5}));
  EXPECT_EQ(tok.encode("bcbc"), (Ids{4, 4}));
  EXPECT_EQ(tok.encode("cab"), (Ids{2, 5}));
  // " abc": b+c, then a+bc (rank 2) before Ġ+a (rank 3); Ġ+abc is no merge.
  EXPECT_EQ(tok.encode(" abc"), (Ids{3, 6}));
  EXPECT_EQ(tok.encode("ca"), (Ids{2, 0}));  // "ca" is in the vocab but no merge makes it
  EXPECT_EQ(tok.encode("a bc"), (Ids{0, 3, 4}));
  // With ignore_merges a pre-token found whole in the vocab is that token.
  Tokenizer whole = Tokenizer::from_json_text(tiny_json(true), "tiny");
  EXPECT_EQ(whole.encode("ca"), (Ids{8}));
  EXPECT_EQ(whole.encode(" abc"), (Ids{9}));
  EXPECT_EQ(whole.encode(" abcabc"), (Ids{3, 6, 6}));
  EXPECT_EQ(whole.decode(Ids{9, 8}), " abcca");
  // A byte the vocab lacks is dropped (no unk token), as in Hugging Face.
  EXPECT_EQ(tok.encode("axc"), (Ids{0, 2}));
}

TEST(TokenizerBpe, AddedTokensAreFoundBeforeSplitting) {
  auto tok_json = [](std::string content, int id, std::string extra) {
    return R"({"id":)" + std::to_string(id) + R"(,"content":)" + nlohmann::json(content).dump() +
           R"(,"single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true)" + extra + "}";
  };
  std::string added = "[" + tok_json("<x>", 10, "") + "," + tok_json("<x>>", 11, "") + "," +
                      tok_json("cc", 12, R"(,"special":false,"normalized":true)") + "," +
                      tok_json("<l>", 13, R"(,"lstrip":true)") + "," + tok_json("<r>", 14, R"(,"rstrip":true)") +
                      "," + tok_json("bb", 15, R"(,"single_word":true)") + "]";
  Tokenizer tok = Tokenizer::from_json_text(tiny_json(false, added), "tiny");
  EXPECT_EQ(tok.encode("ab<x>c"), (Ids{5, 10, 2}));
  EXPECT_EQ(tok.encode("a<x>>b"), (Ids{0, 11, 1}));  // the longest match wins
  EXPECT_EQ(tok.encode("<x><x>"), (Ids{10, 10}));
  EXPECT_EQ(tok.encode("acca"), (Ids{0, 12, 0}));
  EXPECT_EQ(tok.encode("a  <l>b"), (Ids{0, 13, 1}));  // lstrip takes the spaces before
  EXPECT_EQ(tok.encode("a<r>  b"), (Ids{0, 14, 1}));  // rstrip takes those after
  EXPECT_EQ(tok.encode("bb abb bb"), (Ids{15, 3, 5, 1, 3, 15}));  // not inside a word
  EXPECT_EQ(tok.decode(Ids{5, 10, 2}), "ab<x>c");
  EXPECT_EQ(tok.decode(Ids{5, 10, 2}, /*skip_special_tokens=*/true), "abc");
  EXPECT_EQ(tok.decode(Ids{0, 12, 0}, true), "acca");  // an added, not special, token stays
  EXPECT_EQ(tok.token_to_id("<x>>"), 11);
  EXPECT_EQ(tok.token_to_id("ab"), 5);
  EXPECT_EQ(tok.id_to_token(3), "Ġ");
}

TEST(TokenizerBpe, NfcNormalizerComposesFirst) {
  Tokenizer nfc = Tokenizer::from_json_text(tiny_json(false, "[]", R"({"type":"NFC"})"), "tiny");
  Tokenizer none = Tokenizer::from_json_text(tiny_json(false), "tiny");
  // "c" + U+0327 COMBINING CEDILLA composes to "ç" (C3 A7), whose bytes the tiny vocab lacks.
  EXPECT_EQ(none.encode("ac\xCC\xA7"), (Ids{0, 2}));
  EXPECT_EQ(nfc.encode("ac\xCC\xA7"), (Ids{0}));
}

// HF's encode with add_special_tokens=True puts the post-processor's
// template around the text (Llama 3's hub tokenizer: <|begin_of_text|> first).
TEST(TokenizerBpe, PostProcessorTemplateWrapsEncodeWithSpecialTokens) {
  const std::string added = R"([{"id":10,"content":"<s>","special":true},{"id":11,"content":"</s>","special":true}])";
  const std::string post = R"({"type":"Sequence","processors":[
      {"type":"ByteLevel","add_prefix_space":true,"trim_offsets":false,"use_regex":true},
      {"type":"TemplateProcessing",
       "single":[{"SpecialToken":{"id":"<s>","type_id":0}},{"Sequence":{"id":"A","type_id":0}},
                 {"SpecialToken":{"id":"</s>","type_id":0}}],
       "pair":[],
       "special_tokens":{"<s>":{"id":"<s>","ids":[10],"tokens":["<s>"]},
                         "</s>":{"id":"</s>","ids":[11],"tokens":["</s>"]}}}]})";
  Tokenizer tok = Tokenizer::from_json_text(tiny_json(false, added, "null", post), "tiny");
  EXPECT_EQ(tok.encode("abc"), (Ids{6}));
  EXPECT_EQ(tok.encode_with_special_tokens("abc"), (Ids{10, 6, 11}));
  Tokenizer plain = Tokenizer::from_json_text(tiny_json(false, added), "tiny");
  EXPECT_EQ(plain.encode_with_special_tokens("abc"), (Ids{6}));
  kiln::test::expect_error(
      [&] {
        Tokenizer::from_json_text(tiny_json(false, added, "null", R"({"type":"BertProcessing"})"),
                                  "bert.json");
      },
      "bert.json: post_processor type 'BertProcessing' is not supported");
}

TEST(TokenizerBpe, ThreadsShareOneTokenizer) {
  Tokenizer tok = Tokenizer::from_json_text(tiny_json(false), "tiny");
  std::string text;
  const char* words[] = {" abc", "abc", "bc", "ab", " cba", "ca"};
  for (int i = 0; i < 20000; ++i) text += words[(i * 7) % 6];
  Ids want = tok.encode(text);
  std::vector<Ids> got(4);
  std::vector<std::thread> threads;
  for (Ids& g : got) threads.emplace_back([&] { g = tok.encode(text); });
  for (std::thread& t : threads) t.join();
  for (const Ids& g : got) EXPECT_EQ(g, want);
}

TEST(TokenizerUtf8, InvalidBytesAreRejectedOrReplaced) {
  Tokenizer tok = Tokenizer::from_json_text(tiny_json(false), "tiny");
  std::string msg = error_of([&] { tok.encode("ab\xC3(c"); });
  EXPECT_NE(msg.find("not valid UTF-8"), std::string::npos) << msg;
  EXPECT_NE(msg.find("byte 2"), std::string::npos) << msg;
  // Hugging Face's lossy decoding: one U+FFFD per maximal ill-formed subpart.
  EXPECT_EQ(kiln::data::to_valid_utf8("a\xE2\x82" "b\xFF\xC0\xAF"), "a\uFFFDb\uFFFD\uFFFD\uFFFD");
  EXPECT_EQ(kiln::data::to_valid_utf8("\xF0\x9F\xA6\x99"), "🦙");
  EXPECT_EQ(kiln::data::find_invalid_utf8("\xED\xA0\x80"), 0u);  // a surrogate
  msg = error_of([&] { tok.decode(Ids{0, 99}); });
  EXPECT_NE(msg.find("id 99"), std::string::npos) << msg;
}

TEST(TokenizerFiles, MalformedFilesGiveClearErrors) {
  auto load_error = [](const std::string& name, const std::string& contents) {
    fs::path p = temp_file(name, contents);
    return error_of([&] { Tokenizer::load(p.string()); });
  };
  auto expect_has = [](const std::string& msg, std::initializer_list<const char*> parts) {
    ASSERT_FALSE(msg.empty()) << "no error";
    for (const char* part : parts) EXPECT_NE(msg.find(part), std::string::npos) << msg;
  };
  std::string good = tiny_json(false);
  ASSERT_NO_THROW(Tokenizer::from_json_text(good, "tiny"));
  expect_has(load_error("truncated.json", good.substr(0, good.size() / 2)), {"truncated.json", "not valid JSON"});
  expect_has(load_error("empty.json", ""), {"empty.json", "not valid JSON"});
  expect_has(load_error("nomodel.json", R"({"version":"1.0","added_tokens":[]})"), {"nomodel.json", "\"model\""});
  expect_has(load_error("array.json", "[1,2]"), {"array.json", "not a tokenizer.json"});
  auto edit = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return s.replace(at, from.size(), to);
  };
  expect_has(load_error("badmerge.json", edit(R"(["a","bc"])", R"(["a","zz"])")),
             {"badmerge.json", "merge 2", "'zz' is not in the vocab"});
  expect_has(load_error("badmerge2.json", edit(R"(["a","bc"])", R"("a")")), {"badmerge2.json", "merges[2]"});
  expect_has(load_error("badmerge3.json", edit(R"(["a","bc"])", R"("a bc x")")),
             {"badmerge3.json", "two tokens separated by one space"});
  expect_has(load_error("wordpiece.json", edit(R"("type":"BPE")", R"("type":"WordPiece")")),
             {"wordpiece.json", "WordPiece", "not supported"});
  expect_has(load_error("regex.json", edit(R"(\\p{N}{1,3})", R"(\\p{N}{1,4})")),
             {"regex.json", "regex is not one kiln implements"});
  expect_has(load_error("vocab.json", "{}"), {"merges.txt"});  // a GPT-2 vocab.json needs its merges
  expect_has(load_error("badid.json", edit(R"("abc":6)", R"("abc":"six")")), {"badid.json", "'abc'"});
  fs::path gpt2_dir = temp_file("gpt2/vocab.json", R"({"a":0,"b":1})").parent_path();
  std::ofstream(gpt2_dir / "merges.txt") << "#version: 0.2\na b\n";
  expect_has(error_of([&] { Tokenizer::load(gpt2_dir.string()); }), {"merges.txt", "'ab' is not in the vocab"});
  expect_has(error_of([] { Tokenizer::load("/nonexistent/tokenizer.json"); }),
             {"/nonexistent/tokenizer.json", "no such file"});
  // Two spellings of one id: encode and decode would disagree.
  expect_has(load_error("dupid.json", edit(R"("ca":8)", R"("ca":4)")),
             {"dupid.json", "model.vocab gives id 4 to both 'bc' and 'ca'"});
  std::string added = R"([{"id":4,"content":"<|x|>","special":true}])";
  expect_has(error_of([&] { Tokenizer::from_json_text(tiny_json(false, added), "added.json"); }),
             {"added.json", "added token '<|x|>' has id 4, which the vocabulary gives to 'bc'"});
  added = R"([{"id":10,"content":"<|x|>"},{"id":10,"content":"<|y|>"}])";
  expect_has(error_of([&] { Tokenizer::from_json_text(tiny_json(false, added), "added2.json"); }),
             {"added token '<|y|>' has id 10, which another added token gives to '<|x|>'"});
  added = R"([{"id":10,"content":"<|x|>"},{"id":11,"content":"<|x|>"}])";
  expect_has(error_of([&] { Tokenizer::from_json_text(tiny_json(false, added), "added3.json"); }),
             {"added token '<|x|>' appears twice, with ids 10 and 11"});
  // Repeating a vocabulary entry with its own id is how GPT-2 lists <|endoftext|>.
  EXPECT_NO_THROW(Tokenizer::from_json_text(tiny_json(false, R"([{"id":4,"content":"bc"}])"), "ok"));
  expect_has(load_error("maxid.json", edit(R"("ca":8)", R"("ca":2147483648)")),
             {"maxid.json", "id of 'ca' must be an integer in [0, 2147483647], got 2147483648"});
  // A far-off id would allocate gigabytes of tables.
  expect_has(load_error("farid.json", edit(R"("ca":8)", R"("ca":999999999)")),
             {"farid.json", "token 'ca' has id 999999999, but the tokenizer has 10 entries"});
  expect_has(error_of([] { Tokenizer::from_json_file("/dev/zero"); }),
             {"/dev/zero: is not a regular file"});
  fs::remove_all(temp_dir());
}

}  // namespace
