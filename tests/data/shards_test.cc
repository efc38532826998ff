// Pre-tokenized shards: round trips in both token widths, `prepare_shards`
// against encoding the documents directly, and corrupt files as clear
// errors naming the file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kiln/base/error.h"
#include "kiln/data/bpe_trainer.h"
#include "kiln/data/dataset.h"
#include "kiln/data/prepare.h"
#include "kiln/data/shards.h"
#include "kiln/data/tokenizer.h"
#include "kiln/data/tokenizer_fingerprint.h"
#include "tests/support/temp_dir.h"

namespace kiln::data {
namespace {

namespace fs = std::filesystem;

void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "expected a kiln::Error";
  } catch (const Error& e) {
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << "\nlacks: " << p;
  }
}

std::vector<std::vector<int32_t>> documents(const TokenCorpus& c) {
  std::vector<std::vector<int32_t>> out;
  for (int64_t d = 0; d < c.num_documents(); ++d) out.push_back(c.document(d));
  return out;
}

TEST(Shards, RoundTripU16AndU32) {
  test::TempDir dir;
  std::vector<int32_t> tokens{0, 5, 65535, 7, 9, 1};
  std::vector<uint64_t> offsets{0, 2, 2, 5, 6};  // an empty document too
  for (int32_t vocab : {65536, 70000}) {
    std::string path = dir / cat("s", vocab, ".bin");
    write_shard(path, tokens, offsets, vocab);
    EXPECT_EQ(fs::file_size(path), kShardHeaderBytes + ((tokens.size() * (vocab > 65536 ? 4 : 2) + 7) / 8 * 8) +
                                       offsets.size() * 8);
    EXPECT_TRUE(is_shard_path(path));
    TokenCorpus c = read_shard(path);
    EXPECT_EQ(documents(c),
              (std::vector<std::vector<int32_t>>{{0, 5}, {}, {65535, 7, 9}, {1}}));
  }
  auto big = std::vector<int32_t>{69999};
  write_shard(dir / "big.bin", big, {0, 1}, 70000);
  EXPECT_EQ(read_shard(dir / "big.bin").document(0), big);
  expect_error([&] { write_shard(dir / "x.bin", {70000}, {0, 1}, 70000); }, {"outside the vocabulary"});
}

TEST(Shards, CorruptFilesAreErrorsNamingThem) {
  test::TempDir dir;
  std::string good = dir / "good.bin";
  write_shard(good, {1, 2, 3, 4}, {0, 1, 4}, 100);
  std::string bytes;
  {
    std::ifstream in(good, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto variant = [&](const std::string& name, std::string b) { return dir.write(name, b); };
  std::string magic = bytes;
  magic[0] = 'X';
  expect_error([&] { read_shard(variant("magic.bin", magic)); }, {"magic.bin", "magic"});
  expect_error([&] { read_shard(variant("short.bin", bytes.substr(0, 20))); }, {"short.bin", "header"});
  expect_error([&] { read_shard(variant("cut.bin", bytes.substr(0, bytes.size() - 8))); },
               {"cut.bin", "truncated"});
  std::string flipped = bytes;
  flipped[kShardHeaderBytes + 1] ^= 1;
  expect_error([&] { read_shard(variant("flip.bin", flipped)); }, {"flip.bin", "checksum"});
  std::string version = bytes;
  version[8] = 9;
  expect_error([&] { read_shard(variant("version.bin", version)); }, {"version.bin", "version"});
  std::string huge = bytes;
  huge[16] = char(0xFF);  // the token count
  expect_error([&] { read_shard(variant("count.bin", huge)); }, {"count.bin"});
  expect_error([&] { read_shard(dir / "missing.bin"); }, {"missing.bin"});
  EXPECT_FALSE(is_shard_path(variant("text.txt", "hello")));
}

Tokenizer small_tokenizer(const std::string& text) {
  BpeTrainerOptions o;
  o.vocab_size = 300;
  BpeTrainer t(o);
  t.add_text(text);
  return Tokenizer::from_json_text(t.train().json, "test");
}

TEST(Shards, PrepareMatchesDirectEncoding) {
  test::TempDir dir;
  // Two folders, files found recursively in sorted order; JSONL and text.
  dir.write("in/b.txt", "second file\n");
  dir.write("in/a/one.txt", "first file, first document\n");
  dir.write("in/a/.hidden.txt", "never read\n");
  dir.write("in/c.jsonl", "{\"text\": \"json one\"}\n\n{\"text\": \"json two\", \"id\": 3}\n");
  Tokenizer tok = small_tokenizer("first second file document json one two");
  std::vector<std::string> want_texts{"first file, first document\n", "second file\n", "json one",
                                      "json two"};
  PrepareOptions o;
  o.shard_tokens = 10;  // several shards
  std::vector<int64_t> progress;
  PrepareResult r = prepare_shards(tok, {dir / "in"}, dir / "out/shards", o,
                                   [&](const PrepareProgress& p) { progress.push_back(p.tokens); });
  EXPECT_EQ(r.train_documents, 4);
  EXPECT_EQ(r.val_documents, 0);
  EXPECT_GT(r.files.size(), 1u);
  EXPECT_FALSE(progress.empty());
  EXPECT_TRUE(is_shard_path(dir / "out/shards"));
  PreparedShards p = read_prepared(dir / "out/shards");
  EXPECT_FALSE(p.has_val);
  EXPECT_EQ(p.vocab_size, tok.vocab_size());
  std::vector<std::vector<int32_t>> want;
  for (const auto& t : want_texts) want.push_back(tok.encode(t));
  EXPECT_EQ(documents(p.train), want);

  // With a validation fraction: every second document is held out.
  o.val_fraction = 0.5;
  r = prepare_shards(tok, {dir / "in"}, dir / "out/shards", o);  // replaces the folder
  p = read_prepared(dir / "out/shards");
  EXPECT_TRUE(p.has_val);
  EXPECT_EQ(documents(p.train), (std::vector<std::vector<int32_t>>{want[0], want[2]}));
  EXPECT_EQ(documents(p.val), (std::vector<std::vector<int32_t>>{want[1], want[3]}));

  // load_dataset reads the folder with its own split.
  DatasetSpec spec;
  spec.paths = {dir / "out/shards"};
  spec.val_fraction = 0.9;  // ignored: the shards have validation files
  Dataset d = load_dataset(spec, &tok);
  EXPECT_EQ(documents(d.train), documents(p.train));
  EXPECT_EQ(documents(d.val), documents(p.val));
}

// Shards made by one tokenizer refuse another: of another size, or of the
// same size but encoding differently (the fingerprint in meta.json).
TEST(Shards, TrainOnlyWithTheTokenizerThatMadeThem) {
  test::TempDir dir;
  dir.write("in.txt", "first second file document json one two\n");
  BpeTrainerOptions bo;
  bo.vocab_size = 300;
  BpeTrainer trainer(bo);
  trainer.add_text("first second file document json one two");
  const std::string json = trainer.train().json;
  Tokenizer tok = Tokenizer::from_json_text(json, "made");
  PrepareOptions o;
  o.tokenizer_name = "made.json";
  prepare_shards(tok, {dir / "in.txt"}, dir / "shards", o);
  PreparedShards p = read_prepared(dir / "shards");
  ASSERT_TRUE(p.tokenizer_fingerprint.has_value());
  EXPECT_EQ(*p.tokenizer_fingerprint, tok.fingerprint());
  DatasetSpec spec;
  spec.paths = {dir / "shards"};
  // The same tokenizer, read again, is the same.
  Tokenizer again = Tokenizer::from_json_text(json, "again");
  EXPECT_EQ(again.fingerprint(), tok.fingerprint());
  EXPECT_GT(load_dataset(spec, &again).train.num_tokens(), 0);
  // Another size.
  Tokenizer smaller = small_tokenizer("abc");
  ASSERT_NE(smaller.vocab_size(), tok.vocab_size());
  expect_error([&] { load_dataset(spec, &smaller); },
               {"were prepared with a tokenizer of ", "(made.json) but this run's has "});
  // The same size, two merges swapped: other ids for the same text.
  nlohmann::json j = nlohmann::json::parse(json);
  auto& merges = j["model"]["merges"];
  ASSERT_GE(merges.size(), 2u);
  std::swap(merges[0], merges[1]);
  Tokenizer swapped = Tokenizer::from_json_text(j.dump(), "swapped");
  ASSERT_EQ(swapped.vocab_size(), tok.vocab_size());
  EXPECT_NE(swapped.fingerprint(), tok.fingerprint());
  expect_error([&] { load_dataset(spec, &swapped); },
               {"were prepared with another tokenizer (made.json) of the same size (fingerprint " +
                fingerprint_text(tok.fingerprint()) + "; this run's is " +
                fingerprint_text(swapped.fingerprint())});
  // A fingerprint that is not one is an error naming the file.
  std::ifstream in(dir / "shards/meta.json");
  nlohmann::json meta = nlohmann::json::parse(in);
  meta["tokenizer_fingerprint"] = "xyz";
  std::ofstream(dir / "shards/meta.json") << meta.dump();
  expect_error([&] { read_prepared(dir / "shards"); },
               {"meta.json", "\"tokenizer_fingerprint\" must be 16 hex digits, got \"xyz\""});
}

TEST(Shards, PrepareErrors) {
  test::TempDir dir;
  Tokenizer tok = small_tokenizer("abc");
  dir.write("empty.txt", "\n  \n");
  expect_error([&] { prepare_shards(tok, {dir / "empty.txt"}, dir / "o1", {}); }, {"no text"});
  expect_error([&] { prepare_shards(tok, {dir / "nope"}, dir / "o2", {}); }, {"nope", "does not exist"});
  dir.write("user/notes.txt", "mine");
  dir.write("in.txt", "abc");
  expect_error([&] { prepare_shards(tok, {dir / "in.txt"}, dir / "user", {}); },
               {"user", "not a kiln shards folder"});
  EXPECT_TRUE(fs::exists(dir / "user/notes.txt"));
  dir.write("bad/meta.json", "{\"format\": \"kiln-shards\", \"vocab_size\": 10, \"train\": [\"t.bin\"]}");
  expect_error([&] { read_prepared(dir / "bad"); }, {"t.bin"});
  dir.write("big/meta.json", "{\"format\": \"kiln-shards\", \"vocab_size\": 4294969344}");
  expect_error([&] { read_prepared(dir / "big"); }, {"\"vocab_size\" must be a positive 32-bit"});
  dir.write("bad2/meta.json", "{not json");
  expect_error([&] { read_prepared(dir / "bad2"); }, {"meta.json", "not valid JSON"});
}

}  // namespace
}  // namespace kiln::data
