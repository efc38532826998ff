#include "kiln/data/dataset.h"

#include <cmath>

#include "kiln/base/error.h"
#include "kiln/data/shards.h"
#include "kiln/data/tokenize_files.h"
#include "kiln/data/tokenizer.h"
#include "kiln/data/tokenizer_fingerprint.h"

namespace kiln::data {

bool is_validation_document(int64_t index, double fraction) {
  return std::floor(double(index + 1) * fraction) > std::floor(double(index) * fraction);
}

std::vector<bool> validation_documents(int64_t num_documents, double fraction) {
  KILN_CHECK(fraction >= 0 && fraction < 1, "validation fraction ", fraction,
             " must be in [0, 1)");
  std::vector<bool> val(static_cast<size_t>(num_documents));
  for (int64_t i = 0; i < num_documents; ++i) val[size_t(i)] = is_validation_document(i, fraction);
  return val;
}

Dataset split_dataset(const TokenCorpus& all, double val_fraction) {
  auto val = validation_documents(all.num_documents(), val_fraction);
  std::vector<int64_t> train_docs, val_docs;
  for (int64_t i = 0; i < all.num_documents(); ++i)
    (val[size_t(i)] ? val_docs : train_docs).push_back(i);
  return {all.subset(train_docs), all.subset(val_docs)};
}

namespace {

// Shards train only with the tokenizer that made them: its ids mean
// nothing to another, even one of the same size.
void check_shards_tokenizer(const PreparedShards& prepared, const std::string& path,
                            const Tokenizer& tokenizer) {
  const std::string made_by =
      prepared.tokenizer_name.empty() ? "" : cat(" (", prepared.tokenizer_name, ")");
  KILN_CHECK(prepared.vocab_size == tokenizer.vocab_size(), "shards '", path,
             "' were prepared with a tokenizer of ", prepared.vocab_size, " tokens", made_by,
             " but this run's has ", tokenizer.vocab_size(),
             ": use the tokenizer the shards were prepared with");
  KILN_CHECK(!prepared.tokenizer_fingerprint ||
                 *prepared.tokenizer_fingerprint == tokenizer.fingerprint(),
             "shards '", path, "' were prepared with another tokenizer", made_by,
             " of the same size (fingerprint ", fingerprint_text(prepared.tokenizer_fingerprint.value_or(0)),
             "; this run's is ", fingerprint_text(tokenizer.fingerprint()),
             "): use the tokenizer the shards were prepared with");
}

}  // namespace

Dataset load_dataset(const DatasetSpec& spec, const Tokenizer* tokenizer) {
  KILN_CHECK(!spec.paths.empty(), "no training data given: pass --data.path");
  KILN_CHECK(spec.val_fraction >= 0 && spec.val_fraction < 1, "data.val_fraction ",
             spec.val_fraction, " must be in [0, 1)");
  Dataset out;
  TokenCorpus unsplit;
  std::vector<std::string> raw;
  for (const auto& path : spec.paths) {
    bool shards = spec.source.format == SourceFormat::shards ||
                  (spec.source.format == SourceFormat::automatic && is_shard_path(path));
    if (!shards) {
      raw.push_back(path);
      continue;
    }
    PreparedShards prepared = read_prepared(path);
    if (tokenizer) check_shards_tokenizer(prepared, path, *tokenizer);
    if (prepared.has_val) {
      out.train.append(prepared.train);
      out.val.append(prepared.val);
    } else {
      unsplit.append(prepared.train);
    }
  }
  if (!raw.empty()) {
    KILN_CHECK(tokenizer, "raw text data needs a tokenizer");
    std::vector<int32_t> tokens;
    std::vector<uint64_t> offsets{0};
    tokenize_files(list_source_files(raw), spec.source, *tokenizer, spec.threads,
                   [&](std::vector<int32_t>& ids) {
                     if (ids.empty()) return;
                     tokens.insert(tokens.end(), ids.begin(), ids.end());
                     offsets.push_back(tokens.size());
                   });
    unsplit.append(TokenCorpus::from_tokens(std::move(tokens), std::move(offsets)));
  }
  Dataset split = split_dataset(unsplit, spec.val_fraction);
  out.train.append(split.train);
  out.val.append(split.val);
  std::string where;
  for (const auto& p : spec.paths) where += (where.empty() ? "'" : ", '") + p + "'";
  KILN_CHECK(out.train.num_tokens() > 0, "the training data (", where,
             ") holds no text: give files with some content");
  return out;
}

}  // namespace kiln::data
