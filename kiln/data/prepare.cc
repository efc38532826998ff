#include "kiln/data/prepare.h"

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "kiln/base/error.h"
#include "kiln/data/dataset.h"
#include "kiln/data/shards.h"
#include "kiln/data/tokenize_files.h"
#include "kiln/data/tokenizer.h"
#include "kiln/data/tokenizer_fingerprint.h"
#include "kiln/io/atomic_file.h"

namespace kiln::data {
namespace fs = std::filesystem;
namespace {

// Documents collected for one split, written out a shard at a time.
struct ShardWriter {
  std::string dir, prefix;
  int32_t vocab_size;
  int64_t shard_tokens;
  std::vector<int32_t> tokens;
  std::vector<uint64_t> offsets{0};
  std::vector<std::string> files;
  int64_t documents = 0, total_tokens = 0;

  void add(const std::vector<int32_t>& ids) {
    tokens.insert(tokens.end(), ids.begin(), ids.end());
    offsets.push_back(tokens.size());
    ++documents;
    total_tokens += int64_t(ids.size());
    if (int64_t(tokens.size()) >= shard_tokens) flush();
  }
  void flush() {
    if (offsets.size() == 1) return;
    char name[32];
    std::snprintf(name, sizeof name, "%s-%05zu.bin", prefix.c_str(), files.size());
    write_shard((fs::path(dir) / name).string(), tokens, offsets, vocab_size);
    files.push_back(name);
    tokens.clear();
    offsets.assign(1, 0);
  }
};

}  // namespace

PrepareResult prepare_shards(const Tokenizer& tokenizer, const std::vector<std::string>& inputs,
                             const std::string& output, const PrepareOptions& options,
                             const std::function<void(const PrepareProgress&)>& progress) {
  KILN_CHECK(options.val_fraction >= 0 && options.val_fraction < 1, "--val-fraction ",
             options.val_fraction, " must be in [0, 1)");
  KILN_CHECK(options.shard_tokens >= 1, "shard size must be at least one token");
  KILN_CHECK(options.source.format != SourceFormat::shards,
             "kiln data prepare reads raw text (plain or JSONL), not shards");
  auto files = list_source_files(inputs);
  PrepareProgress state;
  for (const auto& f : files) {
    std::error_code ec;
    auto size = fs::file_size(f, ec);
    state.bytes_total += ec ? 0 : size;
  }
  std::error_code ec;
  if (fs::exists(output, ec)) {
    KILN_CHECK(fs::is_directory(output, ec) &&
                   (fs::is_empty(output, ec) || fs::exists(fs::path(output) / "meta.json", ec)),
               "output '", output, "' exists and is not a kiln shards folder: remove it or "
               "choose another --output");
  }
  auto parent = fs::path(output).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);

  AtomicDir dir(output);
  int32_t vocab = tokenizer.vocab_size();
  ShardWriter train{dir.temp_path(), "train", vocab, options.shard_tokens};
  ShardWriter val{dir.temp_path(), "val", vocab, options.shard_tokens};
  int64_t index = 0;
  tokenize_files(
      files, options.source, tokenizer, options.threads,
      [&](std::vector<int32_t>& ids) {
        if (ids.empty()) return;
        (is_validation_document(index++, options.val_fraction) ? val : train).add(ids);
        ++state.documents;
        state.tokens += int64_t(ids.size());
      },
      [&](uint64_t bytes) {
        state.bytes_done = bytes;
        if (progress) progress(state);
      });
  std::string where;
  for (const auto& p : inputs) where += (where.empty() ? "'" : ", '") + p + "'";
  KILN_CHECK(train.documents > 0, "the input (", where, ") holds no text to prepare");
  train.flush();
  val.flush();

  nlohmann::json meta = {
      {"format", "kiln-shards"},
      {"version", kShardVersion},
      {"vocab_size", vocab},
      {"tokenizer", options.tokenizer_name},
      {"tokenizer_fingerprint", fingerprint_text(tokenizer.fingerprint())},
      {"val_fraction", options.val_fraction},
      {"train", train.files},
      {"val", val.files},
      {"documents", {{"train", train.documents}, {"val", val.documents}}},
      {"tokens", {{"train", train.total_tokens}, {"val", val.total_tokens}}},
  };
  write_file_atomic((fs::path(dir.temp_path()) / "meta.json").string(), meta.dump(2) + "\n");
  dir.commit();

  PrepareResult result{train.documents, train.total_tokens, val.documents, val.total_tokens, {}};
  result.files = train.files;
  result.files.insert(result.files.end(), val.files.begin(), val.files.end());
  return result;
}

}  // namespace kiln::data
