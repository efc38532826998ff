// `kiln data prepare`: tokenizes raw text sources once into a folder of
// shards (kiln/data/shards.h) that training then memory-maps.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kiln/data/text_source.h"

namespace kiln {
class Tokenizer;
}

namespace kiln::data {

struct PrepareOptions {
  TextSourceOptions source;
  double val_fraction = 0.0;  // documents held out, chosen by is_validation_document()
  int64_t shard_tokens = int64_t(1) << 28;  // tokens per shard file at most (whole documents)
  int threads = 0;                          // tokenizer threads; 0 = hardware concurrency
  std::string tokenizer_name;               // recorded in meta.json
};

struct PrepareProgress {
  uint64_t bytes_done = 0, bytes_total = 0;
  int64_t documents = 0, tokens = 0;
};

struct PrepareResult {
  int64_t train_documents = 0, train_tokens = 0, val_documents = 0, val_tokens = 0;
  std::vector<std::string> files;  // shard files written (names inside `output`)
};

// Tokenizes `inputs` (files or folders) into the folder `output`, built
// aside and renamed into place (an existing folder is replaced whole).
// `progress` is called as input is consumed. An input without any document
// is a kiln::Error.
PrepareResult prepare_shards(const Tokenizer& tokenizer, const std::vector<std::string>& inputs,
                             const std::string& output, const PrepareOptions& options,
                             const std::function<void(const PrepareProgress&)>& progress = {});

}  // namespace kiln::data
