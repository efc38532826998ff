// A training dataset from a spec: raw text (plain or JSONL) tokenized on the
// fly in memory when the run starts (in parallel over documents; nothing is
// cached — `kiln data prepare` makes reusable shards), or prepared shards
// read by memory mapping. Split into training and held-out validation
// documents deterministically.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/data/corpus.h"
#include "kiln/data/text_source.h"

namespace kiln {
class Tokenizer;
}

namespace kiln::data {

struct DatasetSpec {
  std::vector<std::string> paths;  // files or folders; shards folders/files are detected
  TextSourceOptions source;
  // Fraction of documents held out for validation (raw text, and shards
  // prepared without their own validation files).
  double val_fraction = 0.0;
  int threads = 0;  // tokenizer threads; 0 = hardware concurrency
};

struct Dataset {
  TokenCorpus train, val;
};

// Validation documents among `num_documents`: document i is held out when
// floor((i + 1) * f) > floor(i * f), i.e. evenly spread, round(n * f) of
// them, the same for every run. f in [0, 1).
std::vector<bool> validation_documents(int64_t num_documents, double fraction);
bool is_validation_document(int64_t index, double fraction);
// Splits `all` by validation_documents().
Dataset split_dataset(const TokenCorpus& all, double val_fraction);

// Reads (and, for raw text, tokenizes with `tokenizer`) every path of
// `spec`. Documents of sources without validation files of their own (raw
// text, shards prepared without a validation fraction) are split by
// spec.val_fraction; prepared validation shards are the validation set.
// `tokenizer` may be null when every path is a shards folder/file. Shards
// whose vocabulary is larger than the tokenizer's, an empty corpus, or a
// missing path is a kiln::Error saying what to do.
Dataset load_dataset(const DatasetSpec& spec, const Tokenizer* tokenizer);

}  // namespace kiln::data
