// `kiln data prepare`: tokenizes text once into shards that training
// memory-maps (kiln/data/prepare.h), with a progress bar on a terminal.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>

#include "apps/kiln/commands.h"
#include "kiln/data/prepare.h"
#include "kiln/data/tokenizer.h"
#include "kiln/runtime/threads.h"

namespace kiln::cli {
namespace {

struct PrepareArgs {
  std::string tokenizer, output;
  std::vector<std::string> inputs;
  std::string format = "auto", text_key = "text", text_split = "file", delimiter = "%";
  double val_fraction = 0.0;
  int64_t shard_tokens = int64_t(1) << 28;
  int threads = 0;
};

// One line redrawn in place: "[#####     ]  52%  12.3/23.6 MB  4.1 MB/s  1.2M tokens".
class ProgressBar {
 public:
  ProgressBar() : tty_(::isatty(STDERR_FILENO) == 1), start_(clock::now()) {}
  void update(const data::PrepareProgress& p) {
    if (!tty_) return;
    double frac = p.bytes_total ? double(p.bytes_done) / double(p.bytes_total) : 1.0;
    double secs = std::chrono::duration<double>(clock::now() - start_).count();
    constexpr int kWidth = 30;
    int filled = int(frac * kWidth);
    std::fprintf(stderr, "\r[%s%s] %3d%%  %.1f/%.1f MB  %.1f MB/s  %lld documents  %lld tokens",
                 std::string(size_t(filled), '#').c_str(),
                 std::string(size_t(kWidth - filled), ' ').c_str(), int(frac * 100),
                 double(p.bytes_done) / 1e6, double(p.bytes_total) / 1e6,
                 secs > 0 ? double(p.bytes_done) / 1e6 / secs : 0.0, (long long)p.documents,
                 (long long)p.tokens);
    std::fflush(stderr);
    drawn_ = true;
  }
  ~ProgressBar() {
    if (drawn_) std::fputc('\n', stderr);
  }

 private:
  using clock = std::chrono::steady_clock;
  bool tty_, drawn_ = false;
  clock::time_point start_;
};

void prepare(const PrepareArgs& a) {
  Tokenizer tokenizer = Tokenizer::load(a.tokenizer);
  data::PrepareOptions options;
  options.source.format = data::parse_source_format(a.format);
  options.source.text_key = a.text_key;
  options.source.text_split = data::parse_text_split(a.text_split);
  options.source.delimiter = a.delimiter;
  options.val_fraction = a.val_fraction;
  options.shard_tokens = a.shard_tokens;
  options.threads = a.threads;
  options.tokenizer_name = a.tokenizer;
  data::PrepareResult r;
  {
    ProgressBar bar;
    r = data::prepare_shards(tokenizer, a.inputs, a.output, options,
                             [&](const data::PrepareProgress& p) { bar.update(p); });
  }
  std::cout << "kiln data prepare: wrote " << a.output << ": " << r.train_documents
            << " training documents (" << r.train_tokens << " tokens), " << r.val_documents
            << " validation documents (" << r.val_tokens << " tokens) in " << r.files.size()
            << " shard files\n";
}

}  // namespace

void add_data(CLI::App& app) {
  auto* data = app.add_subcommand("data", "Prepare training data");
  data->require_subcommand(1);
  auto args = std::make_shared<PrepareArgs>();
  auto* p = data->add_subcommand("prepare", "Tokenize text files into training shards");
  p->add_option("--tokenizer", args->tokenizer, "tokenizer.json (or a folder holding one)")
      ->required();
  p->add_option("--input", args->inputs, "Text/JSONL files or folders (recursive)")
      ->required()
      ->expected(1, -1);
  p->add_option("--output", args->output, "Folder to write the shards and meta.json into")
      ->required();
  p->add_option("--val-fraction", args->val_fraction,
                "Fraction of documents held out for validation")
      ->check(CLI::Range(0.0, 0.999999));
  p->add_option("--format", args->format, "auto | text | jsonl")->capture_default_str();
  // --text-key as kiln train's data.text_key; --text-field, its first name, still works.
  p->add_option("--text-key,--text-field", args->text_key, "JSONL key holding the text")
      ->capture_default_str();
  p->add_option("--text-split", args->text_split,
                "How plain text splits into documents: file | paragraph | line | delimiter")
      ->capture_default_str();
  p->add_option("--delimiter", args->delimiter, "Separator line for --text-split delimiter")
      ->capture_default_str();
  p->add_option("--shard-tokens", args->shard_tokens, "Tokens per shard file at most")
      ->check(kPositiveCount);
  p->add_option("--threads", args->threads, "Tokenizer threads (0: all cores)")
      ->check(CLI::Range(0, kMaxThreads));
  p->callback([args] { prepare(*args); });
}

}  // namespace kiln::cli
