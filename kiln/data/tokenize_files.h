// Tokenizing raw text sources: documents are read file by file, gathered in
// batches and encoded in parallel, and handed out in source order, so the
// result does not depend on the thread count.
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

// Calls emit(ids) for every document of `files` in order and progress(bytes)
// with the input bytes consumed so far. threads <= 0: hardware concurrency.
void tokenize_files(const std::vector<std::string>& files, const TextSourceOptions& options,
                    const Tokenizer& tokenizer, int threads,
                    const std::function<void(std::vector<int32_t>& ids)>& emit,
                    const std::function<void(uint64_t bytes_done)>& progress = {});

}  // namespace kiln::data
