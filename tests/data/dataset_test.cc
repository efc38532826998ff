// Raw text sources and datasets: file discovery, document splitting (file,
// paragraph, line, delimiter, JSONL), the validation split, and errors for
// missing paths, bad JSONL, invalid UTF-8 and empty corpora.
#include <gtest/gtest.h>

#include "kiln/base/error.h"
#include "kiln/data/bpe_trainer.h"
#include "kiln/data/dataset.h"
#include "kiln/data/default_corpus.h"
#include "kiln/data/text_source.h"
#include "kiln/data/tokenizer.h"
#include "tests/support/temp_dir.h"
#include "tests/support/support.h"

namespace kiln::data {
namespace {

using Docs = std::vector<std::string>;
using test::error_of;

Docs split(std::string_view text, TextSplit how, bool jsonl = false) {
  TextSourceOptions o;
  o.text_split = how;
  Docs out;
  split_documents(text, "test.txt", jsonl, o, [&](std::string_view d) { out.emplace_back(d); });
  return out;
}

TEST(TextSource, Splits) {
  std::string text = "\nfirst line\nsecond line\r\n\n  \nthird\n%\nfourth\n";
  EXPECT_EQ(split(text, TextSplit::file), Docs{text});
  EXPECT_EQ(split(text, TextSplit::line),
            (Docs{"first line", "second line", "third", "%", "fourth"}));
  EXPECT_EQ(split(text, TextSplit::paragraph),
            (Docs{"first line\nsecond line", "third\n%\nfourth"}));
  EXPECT_EQ(split(text, TextSplit::delimiter),
            (Docs{"first line\nsecond line\r\n\n  \nthird", "fourth"}));
  EXPECT_EQ(split("  \n\n", TextSplit::file), Docs{});
  EXPECT_EQ(split("%\n%\nonly\n%\n", TextSplit::delimiter), Docs{"only"});
}

TEST(TextSource, Jsonl) {
  TextSourceOptions o;
  o.text_key = "body";
  Docs out;
  split_documents("{\"body\": \"a\\nb\"}\n\n{\"body\": \"\", \"x\": 1}\n{\"body\": \"c\"}", "d.jsonl", true, o,
                  [&](std::string_view d) { out.emplace_back(d); });
  EXPECT_EQ(out, (Docs{"a\nb", "c"}));
  auto run = [&](std::string_view s) {
    return error_of([&] { split_documents(s, "d.jsonl", true, o, [](std::string_view) {}); });
  };
  EXPECT_NE(run("{\"body\": 1}").find("d.jsonl:1"), std::string::npos);
  EXPECT_NE(run("{\"text\": \"x\"}").find("'body'"), std::string::npos);
  // The hint names the keys that exist.
  EXPECT_NE(run("{\"text\": \"x\"}").find("--data.text_key for kiln train, --text-key for kiln data prepare"),
            std::string::npos);
  EXPECT_NE(run("{\"body\": \"x\"}\n[1]").find("d.jsonl:2"), std::string::npos);
  EXPECT_NE(run("{oops").find("not valid JSON"), std::string::npos);
}

TEST(TextSource, InvalidUtf8NamesFileAndOffset) {
  std::string e = error_of([] { split("ok \xff bad", TextSplit::file); });
  EXPECT_NE(e.find("test.txt"), std::string::npos) << e;
  EXPECT_NE(e.find("byte 3"), std::string::npos) << e;
}

TEST(TextSource, ListFilesSortedRecursive) {
  test::TempDir dir;
  dir.write("d/z.txt", "z");
  dir.write("d/a/b.txt", "b");
  dir.write("d/.git/x", "x");
  dir.write("d/B.txt", "B");
  dir.write("single.txt", "s");
  auto files = list_source_files({dir / "single.txt", dir.path() + "/d"});
  EXPECT_EQ(files, (std::vector<std::string>{dir / "single.txt", dir.path() + "/d/B.txt",
                                             dir.path() + "/d/a/b.txt", dir.path() + "/d/z.txt"}));
  EXPECT_NE(error_of([&] { list_source_files({dir / "missing"}); }).find("does not exist"),
            std::string::npos);
  // A device never ends: refused, not read until memory runs out.
  EXPECT_NE(error_of([&] { list_source_files({"/dev/zero"}); })
                .find("data path '/dev/zero' is neither a file nor a folder"),
            std::string::npos);
  std::filesystem::create_directories(dir.path() + "/empty");
  EXPECT_NE(error_of([&] { list_source_files({dir.path() + "/empty"}); }).find("holds no files"),
            std::string::npos);
  EXPECT_THROW(parse_text_split("words"), Error);
  EXPECT_THROW(parse_source_format("csv"), Error);
}

TEST(Dataset, ValidationSplitIsEvenAndDeterministic) {
  auto v = validation_documents(10, 0.2);
  EXPECT_EQ(v, (std::vector<bool>{false, false, false, false, true, false, false, false, false, true}));
  EXPECT_EQ(validation_documents(5, 0.0), std::vector<bool>(5, false));
  EXPECT_THROW(validation_documents(5, 1.0), Error);
  TokenCorpus c = TokenCorpus::from_documents({{1}, {2}, {3}, {4}, {5}, {6}, {7}, {8}, {9}, {10}});
  Dataset d = split_dataset(c, 0.2);
  EXPECT_EQ(d.train.num_documents(), 8);
  EXPECT_EQ(d.val.document(0), std::vector<int32_t>{5});
  EXPECT_EQ(d.val.document(1), std::vector<int32_t>{10});
}

TEST(Dataset, LoadsRawTextTokenizedInOrder) {
  test::TempDir dir;
  dir.write("c/1.txt", "alpha beta\n\ngamma\n");
  dir.write("c/2.jsonl", "{\"text\": \"delta\"}\n{\"text\": \"epsilon\"}\n");
  BpeTrainerOptions bo;
  bo.vocab_size = 280;
  BpeTrainer trainer(bo);
  trainer.add_text("alpha beta gamma delta epsilon");
  Tokenizer tok = Tokenizer::from_json_text(trainer.train().json, "test");
  DatasetSpec spec;
  spec.paths = {dir.path() + "/c"};
  spec.source.text_split = TextSplit::paragraph;
  spec.val_fraction = 0.25;
  spec.threads = 3;
  Dataset d = load_dataset(spec, &tok);
  ASSERT_EQ(d.train.num_documents(), 3);
  ASSERT_EQ(d.val.num_documents(), 1);
  EXPECT_EQ(d.train.document(0), tok.encode("alpha beta"));
  EXPECT_EQ(d.train.document(1), tok.encode("gamma"));
  EXPECT_EQ(d.train.document(2), tok.encode("delta"));
  EXPECT_EQ(d.val.document(0), tok.encode("epsilon"));

  dir.write("empty.txt", "");
  spec.paths = {dir / "empty.txt"};
  EXPECT_NE(error_of([&] { load_dataset(spec, &tok); }).find("holds no text"), std::string::npos);
  spec.paths = {dir / "nowhere"};
  EXPECT_NE(error_of([&] { load_dataset(spec, &tok); }).find("nowhere"), std::string::npos);
  spec.paths = {};
  EXPECT_NE(error_of([&] { load_dataset(spec, &tok); }).find("--data.path"), std::string::npos);
}

TEST(DefaultCorpus, InstalledOrClearError) {
  try {
    DefaultCorpus c = default_corpus();
    EXPECT_FALSE(c.paths.empty());
    EXPECT_EQ(c.source.text_split, TextSplit::delimiter);
    // Every file is UTF-8 text that splits into documents.
    int64_t docs = 0;
    for_each_document(c.paths, c.source, [&](std::string_view) { ++docs; });
    EXPECT_GT(docs, 10000);
  } catch (const Error& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("scripts/setup.sh"), std::string::npos) << what;
    EXPECT_NE(what.find("--data.path"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace kiln::data
