// `kiln tokenizer`: encode text to ids, decode ids to text, and train a
// byte-level BPE, as a user runs them in a shell pipeline.
#include <charconv>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "apps/kiln/commands.h"
#include "kiln/base/error.h"
#include "kiln/data/bpe_trainer.h"
#include "kiln/data/chat_data.h"
#include "kiln/data/text_source.h"
#include "kiln/data/tokenizer.h"
#include "kiln/io/atomic_file.h"

namespace kiln::cli {
namespace {

namespace fs = std::filesystem;

std::string read_stdin() {
  std::ostringstream ss;
  ss << std::cin.rdbuf();
  return ss.str();
}

void append_ids(std::string& out, const std::vector<int32_t>& ids) {
  out += '[';
  char buf[16];
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ',';
    out.append(buf, std::to_chars(buf, buf + sizeof buf, ids[i]).ptr);
  }
  out += ']';
}

struct EncodeArgs {
  std::string path;
  bool jsonl = false;
  bool stats = false;
  bool chat = false;
  std::string train_on = "completion";
};

// --chat: each stdin line a conversation {"messages": [...]}, printed as the
// ids the trainer trains on and their labels (the id where it is a training
// target, -100 elsewhere), from the same code the trainer runs.
void encode_chats(const EncodeArgs& a) {
  const Tokenizer tok = Tokenizer::load(a.path);
  const data::ChatTemplate chat = data::tokenizer_chat_template(a.path);
  const data::TrainOn train_on = data::parse_train_on(a.train_on);
  std::string line;
  for (size_t n = 1; std::getline(std::cin, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      nlohmann::ordered_json j = nlohmann::ordered_json::parse(line);
      KILN_CHECK(j.is_object() && j.contains("messages"),
                 "expected an object with \"messages\"");
      data::EncodedChat c = data::encode_chat(chat, tok, j["messages"], train_on);
      std::vector<int32_t> labels(c.ids.size());
      for (size_t t = 0; t < c.ids.size(); ++t) labels[t] = c.trained[t] ? c.ids[t] : -100;
      std::string out = "{\"ids\":";
      append_ids(out, c.ids);
      out += ",\"labels\":";
      append_ids(out, labels);
      std::cout << out << "}\n";
    } catch (const nlohmann::json::exception& e) {
      fail("stdin line ", n, ": not valid JSON: ", e.what());
    } catch (const Error& e) {
      fail("stdin line ", n, ": ", e.what());
    }
  }
}

// CPU time of this thread: with other work on the machine, a fairer
// per-core speed than the wall clock.
double thread_seconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

void encode(const EncodeArgs& a) {
  if (a.chat) return encode_chats(a);
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  Tokenizer tok = Tokenizer::load(a.path);
  double load_secs = std::chrono::duration<double>(clock::now() - t0).count();
  std::string out;
  size_t bytes = 0, tokens = 0;
  double secs = 0, cpu_secs = 0;  // encoding only, not reading or printing
  auto timed_encode = [&](std::string_view text) {
    auto t = clock::now();
    double c = thread_seconds();
    std::vector<int32_t> ids = tok.encode(text);
    cpu_secs += thread_seconds() - c;
    secs += std::chrono::duration<double>(clock::now() - t).count();
    bytes += text.size();
    tokens += ids.size();
    return ids;
  };
  auto report = [&] {
    if (a.stats)
      std::cerr << "kiln tokenizer encode: " << bytes << " bytes -> " << tokens << " tokens in " << secs << " s: "
                << (secs > 0 ? bytes / 1e6 / secs : 0.0) << " MB/s (" << (cpu_secs > 0 ? bytes / 1e6 / cpu_secs : 0.0)
                << " MB/s of CPU time); loading took " << load_secs << " s\n";
  };
  if (!a.jsonl) {
    append_ids(out, timed_encode(read_stdin()));
    std::cout << out << "\n";
    return report();
  }
  std::string line;
  for (size_t n = 1; std::getline(std::cin, line); ++n) {
    if (line.empty() || line == "\r") continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception&) {
      fail("stdin line ", n, ": not valid JSON; --jsonl expects one {\"text\": ...} object a line");
    }
    auto text = j.is_object() ? j.find("text") : j.end();
    KILN_CHECK(j.is_object() && text != j.end() && text->is_string(), "stdin line ", n,
               ": expected an object with a string \"text\" field");
    out.assign("{\"ids\":");
    try {
      append_ids(out, timed_encode(text->get<std::string>()));
    } catch (const Error& e) {
      fail("stdin line ", n, ": ", e.what());
    }
    out += "}\n";
    std::cout << out;
  }
  report();
}

void decode(const std::string& path, bool skip_special) {
  Tokenizer tok = Tokenizer::load(path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_stdin());
  } catch (const nlohmann::json::exception&) {
    fail("stdin: not valid JSON; decode expects a JSON array of token ids");
  }
  KILN_CHECK(j.is_array(), "stdin: decode expects a JSON array of token ids");
  std::vector<int32_t> ids;
  for (const auto& v : j) {
    KILN_CHECK(v.is_number_integer(), "stdin: token ids must be integers, got ", v.dump());
    // Non-negative JSON integers read as unsigned: a huge one must not wrap to -1.
    const bool in_vocab = v.is_number_unsigned()
                              ? v.get<uint64_t>() < uint64_t(tok.vocab_size())
                              : v.get<int64_t>() >= 0 && v.get<int64_t>() < tok.vocab_size();
    KILN_CHECK(in_vocab, "stdin: token id ", v.dump(), " is outside the vocabulary (0..",
               tok.vocab_size() - 1, ")");
    ids.push_back(v.get<int32_t>());
  }
  std::cout << tok.decode(ids, skip_special);
}

struct TrainArgs {
  std::vector<std::string> inputs;
  int64_t vocab_size = 0;
  std::string output;
  std::vector<std::string> special;
  int64_t min_frequency = 2;
};

void train(const TrainArgs& a) {
  BpeTrainerOptions o;
  o.vocab_size = a.vocab_size;
  o.special_tokens = a.special;
  o.min_frequency = a.min_frequency;
  BpeTrainer trainer(o);
  auto start = std::chrono::steady_clock::now();
  uintmax_t bytes = 0;
  for (const std::string& f : data::list_source_files(a.inputs)) {
    trainer.add_file(f);
    std::error_code ec;
    bytes += fs::file_size(f, ec);
  }
  BpeTrainer::Result r = trainer.train();
  Tokenizer::from_json_text(r.json, a.output);  // what was written must load
  write_file_atomic(a.output, r.json);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cerr << "kiln tokenizer train: " << r.vocab_size << " tokens (" << r.merges << " merges) from "
            << bytes / 1e6 << " MB in " << secs << " s -> " << a.output << "\n";
}

}  // namespace

void add_tokenizer(CLI::App& app) {
  auto* cmd = app.add_subcommand("tokenizer", "Encode, decode or train a BPE tokenizer");
  cmd->require_subcommand(1);
  const char* file_help = "tokenizer.json, a GPT-2 vocab.json (merges.txt beside it), or a folder";

  auto enc_args = std::make_shared<EncodeArgs>();
  auto* enc = cmd->add_subcommand("encode", "Read text on stdin, print its token ids as a JSON array");
  enc->add_option("--tokenizer", enc_args->path, file_help)->required();
  enc->add_flag("--jsonl", enc_args->jsonl, "Read lines {\"text\": ...}, print one {\"ids\": [...]} line each");
  enc->add_flag("--stats", enc_args->stats, "Print the encoding speed (MB/s) on stderr");
  auto* chat_flag = enc->add_flag("--chat", enc_args->chat,
                "Read lines {\"messages\": [...]}, render each with the tokenizer's chat template "
                "(tokenizer_config.json) and print {\"ids\", \"labels\"} as training sees them");
  enc->add_option("--train-on", enc_args->train_on,
                  "With --chat: completion (assistant tokens), prompt or all")
      ->capture_default_str()
      ->needs(chat_flag);
  enc->callback([enc_args] { encode(*enc_args); });

  auto dec_args = std::make_shared<std::pair<std::string, bool>>();
  auto* dec = cmd->add_subcommand("decode", "Read a JSON array of token ids on stdin, print the text");
  dec->add_option("--tokenizer", dec_args->first, file_help)->required();
  dec->add_flag("--skip-special", dec_args->second, "Leave special tokens out of the text");
  dec->callback([dec_args] { decode(dec_args->first, dec_args->second); });

  auto t = std::make_shared<TrainArgs>();
  auto* tr = cmd->add_subcommand("train", "Learn a byte-level BPE from text files; write a tokenizer.json");
  tr->add_option("--input", t->inputs, "Text files or folders of them (UTF-8)")->required()->expected(1, -1);
  tr->add_option("--vocab-size", t->vocab_size, "Tokens in all: special tokens + 256 bytes + merges")
      ->required()
      ->check(kPositiveCount);
  tr->add_option("--output", t->output, "Where to write tokenizer.json")->required();
  tr->add_option("--special", t->special, "Special tokens, e.g. <|endoftext|> (ids 0, 1, ...)")->expected(1, -1);
  tr->add_option("--min-frequency", t->min_frequency, "Stop merging pairs seen fewer times than this")
      ->check(kPositiveCount);
  tr->callback([t] { train(*t); });
}

}  // namespace kiln::cli
