#include "kiln/data/tokenize_files.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>

#include "kiln/data/tokenizer.h"

namespace kiln::data {
namespace {

// Input gathered before encoding, so that small files encode in parallel too.
constexpr uint64_t kBatchBytes = 8 << 20;

void encode_all(const Tokenizer& tokenizer, const std::vector<std::string>& docs,
                std::vector<std::vector<int32_t>>& out, int threads) {
  out.assign(docs.size(), {});
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  auto work = [&] {
    try {
      for (size_t i; !failed && (i = next++) < docs.size();) tokenizer.encode(docs[i], out[i]);
    } catch (...) {
      if (!failed.exchange(true)) error = std::current_exception();
    }
  };
  size_t n = std::min(size_t(threads), docs.size());
  std::vector<std::thread> pool;
  for (size_t t = 1; t < n; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace

void tokenize_files(const std::vector<std::string>& files, const TextSourceOptions& options,
                    const Tokenizer& tokenizer, int threads,
                    const std::function<void(std::vector<int32_t>&)>& emit,
                    const std::function<void(uint64_t)>& progress) {
  if (threads <= 0) threads = int(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::string> docs;
  std::vector<std::vector<int32_t>> ids;
  uint64_t pending = 0, done = 0;
  auto flush = [&] {
    encode_all(tokenizer, docs, ids, threads);
    for (auto& d : ids) emit(d);
    docs.clear();
    done += pending;
    pending = 0;
    if (progress) progress(done);
  };
  for (const auto& file : files) {
    for_each_document(
        {file}, options, [&](std::string_view text) { docs.emplace_back(text); },
        [&](uint64_t bytes) { pending += bytes; });
    if (pending >= kBatchBytes) flush();
  }
  flush();
}

}  // namespace kiln::data
