#include "kiln/train/run_inputs.h"

#include <chrono>
#include <filesystem>
#include <iomanip>
#include <optional>

#include "kiln/base/error.h"
#include "kiln/data/bpe_trainer.h"
#include "kiln/data/default_corpus.h"
#include "kiln/data/shards.h"
#include "kiln/data/tokenizer_fingerprint.h"
#include "kiln/io/atomic_file.h"
#include "kiln/train/trainer.h"

namespace kiln::train {
namespace {

namespace fs = std::filesystem;

std::string absolute(const std::string& path) {
  return fs::absolute(path).lexically_normal().string();
}

RunTokenizer loaded(const std::string& path, const char* why, std::ostream& out) {
  RunTokenizer t{std::make_unique<Tokenizer>(Tokenizer::load(path)), path};
  out << "tokenizer: " << path << ", " << t.tokenizer->vocab_size() << " tokens (" << why << ")"
      << std::endl;
  return t;
}

// Pretrained weights mean something only with the tokenizer they were
// trained with: the folder's, or a given one that encodes the same.
RunTokenizer initial_folder_tokenizer(const TrainConfig& c, std::ostream& out) {
  const std::string dir = absolute(c.checkpoint.initial_load_path);
  const bool has = folder_has_tokenizer(dir);
  if (c.model.tokenizer_path.empty()) {
    KILN_CHECK(has, "checkpoint.initial_load_path '", dir, "' holds no tokenizer (tokenizer.json, "
               "or vocab.json and merges.txt); its weights need the one they were trained with: "
               "put it there or set --model.tokenizer_path");
    return loaded(dir, "checkpoint.initial_load_path's", out);
  }
  RunTokenizer given = loaded(absolute(c.model.tokenizer_path), "model.tokenizer_path", out);
  if (!has) return given;
  const Tokenizer folder = Tokenizer::load(dir);
  KILN_CHECK(given.tokenizer->fingerprint() == folder.fingerprint(), "model.tokenizer_path '",
             given.path, "' encodes differently from the tokenizer in checkpoint.initial_load_path '",
             dir, "' (fingerprints ", data::fingerprint_text(given.tokenizer->fingerprint()), " and ",
             data::fingerprint_text(folder.fingerprint()), "): the weights need the folder's");
  return given;
}

RunTokenizer learned_tokenizer(const ModelConfig& mc, const DataSource& src,
                               const std::string& path, std::ostream& out) {
  KILN_CHECK(src.source.format != data::SourceFormat::shards, "data.format shards: token shards "
             "need the tokenizer they were made with: set --model.tokenizer_path");
  for (const std::string& p : src.paths)
    KILN_CHECK(src.source.format != data::SourceFormat::automatic || !data::is_shard_path(p),
               "data path '", p, "' holds token shards, which need the tokenizer they were made "
               "with: set --model.tokenizer_path");
  std::vector<std::string> files = data::list_source_files(src.paths);  // missing paths fail here
  std::error_code ec;
  if (fs::is_regular_file(path, ec))
    out << "note: " << path << " is from a run that left no checkpoint; learning a new one in its "
        << "place" << std::endl;
  out << "learning a " << mc.vocab_size << "-token BPE tokenizer from " << src.description << " ..."
      << std::endl;
  const auto t0 = std::chrono::steady_clock::now();
  BpeTrainerOptions options;
  options.vocab_size = mc.vocab_size;
  options.special_tokens = {"<|begin_of_text|>", "<|end_of_text|>"};
  BpeTrainer trainer(options);
  data::for_each_document(files, src.source,
                          [&](std::string_view text) { trainer.add_text(text); });
  BpeTrainer::Result r = trainer.train();
  fs::create_directories(fs::path(path).parent_path());
  write_file_atomic(path, r.json);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out << "tokenizer: " << path << ", " << r.vocab_size << " tokens (" << r.merges
      << " merges, learned in " << std::fixed << std::setprecision(1) << seconds << " s)"
      << std::endl;
  out.unsetf(std::ios::floatfield);
  return {std::make_unique<Tokenizer>(Tokenizer::from_json_text(r.json, path)), path};
}

}  // namespace

DataSource data_source(const TrainConfig& c) {
  if (c.data.path.empty()) {
    data::DefaultCorpus d = data::default_corpus();
    return {d.paths, d.source, d.description};
  }
  DataSource s{{c.data.path}, {}, c.data.path};
  // Chat data is JSONL, whose conversations the trainer renders itself.
  s.source.format = data::parse_source_format(c.data.format == "chat" ? "jsonl" : c.data.format);
  s.source.text_key = c.data.text_key;
  s.source.text_split = data::parse_text_split(c.data.text_split);
  s.source.delimiter = c.data.delimiter;
  return s;
}

std::string checkpoint_folder(const TrainConfig& c) {
  return (fs::path(c.job.dump_folder) / c.checkpoint.folder).string();
}

std::optional<int64_t> resume_step(const TrainConfig& c, const CheckpointManager& checkpoints) {
  if (c.checkpoint.load_step >= 0) return c.checkpoint.load_step;
  if (!c.checkpoint.enable) return std::nullopt;
  return checkpoints.latest_step();
}

RunTokenizer run_tokenizer(const TrainConfig& c, const ModelConfig& mc, const DataSource& src,
                           bool lead, std::ostream& out) {
  if (!c.checkpoint.initial_load_path.empty()) return initial_folder_tokenizer(c, out);
  if (!c.model.tokenizer_path.empty())
    return loaded(absolute(c.model.tokenizer_path), "model.tokenizer_path", out);
  const std::string path = absolute(dump_tokenizer_path(c));
  if (!lead) {
    std::error_code ec;
    KILN_CHECK(fs::is_regular_file(path, ec), "rank 0 wrote the run's tokenizer to ", path,
               ", which this rank cannot see: every rank must see the same --job.dump_folder "
               "(put it on a file system that all hosts share)");
    return loaded(path, "the lead rank's", out);
  }
  std::error_code ec;
  if (fs::is_regular_file(path, ec) && resume_step(c, CheckpointManager(checkpoint_folder(c))))
    return loaded(path, "the one the checkpoints were trained with", out);
  return learned_tokenizer(mc, src, path, out);
}

}  // namespace kiln::train
