// `kiln eval`: the mean loss and perplexity of a checkpoint or Hugging Face
// folder on a dataset: text packed into windows as training packs it, JSONL
// documents or chat conversations one per sequence (truncated to the
// sequence length, never packed with others), in batches of one padded
// shape that one compiled program runs.
#include <cmath>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>

#include "apps/kiln/commands.h"
#include "apps/kiln/model_source.h"
#include "kiln/base/error.h"
#include "kiln/data/chat_data.h"
#include "kiln/data/loader.h"
#include "kiln/data/text_source.h"
#include "kiln/train/evaluation.h"

namespace kiln::cli {
namespace {

struct EvalArgs {
  ModelSource model;
  std::vector<std::string> data;
  std::string format = "auto", text_key = "text", train_on = "completion";
  int64_t seq_len = 0;  // 0: the model's
  int64_t batch_size = 8;
  bool json = false;
};

// Every document of the files, tokenized; with `special_tokens` as HF's
// tokenizer(text) does (its post-processor's template, e.g. a document-start
// token), else the text's tokens alone (packing adds its own).
std::vector<std::vector<int32_t>> tokenize_documents(const std::vector<std::string>& files,
                                                     const data::TextSourceOptions& options,
                                                     const Tokenizer& tok, bool special_tokens) {
  std::vector<std::vector<int32_t>> docs;
  data::for_each_document(files, options, [&](std::string_view text) {
    docs.push_back(special_tokens ? tok.encode_with_special_tokens(text) : tok.encode(text));
  });
  return docs;
}

// Text packed into windows of seq_len as training packs it (documents
// separated by the end-of-text token), every window once.
std::vector<train::TokenSequence> packed_windows(std::vector<std::vector<int32_t>> docs,
                                                 const Tokenizer& tok, int64_t seq_len) {
  data::LoaderOptions o;
  o.packing.seq_len = seq_len;
  o.packing.bos_id = bos_token_id(tok);
  o.packing.eos_id = eos_token_id(tok);
  o.local_batch_size = 1;
  o.shuffle = false;
  data::DataLoader loader(
      std::make_shared<const data::TokenCorpus>(data::TokenCorpus::from_documents(docs)), o);
  std::vector<train::TokenSequence> out;
  for (int64_t n = 0; n < loader.windows_per_epoch(); ++n) {
    data::Batch b = loader.sample(n);
    out.push_back({b.ids.to_vector<int64_t>(), b.targets.to_vector<int64_t>()});
  }
  return out;
}

void eval(const EvalArgs& a) {
  a.model.check();
  KILN_CHECK(!a.data.empty(), "kiln eval needs --data FILE_OR_FOLDER");
  KILN_CHECK(a.format == "auto" || a.format == "text" || a.format == "jsonl" || a.format == "chat",
             "--format must be auto, text, jsonl or chat, got '", a.format, "'");
  data::parse_train_on(a.train_on);  // checked before the model loads
  KILN_CHECK(a.batch_size >= 1, "--batch-size must be >= 1, got ", a.batch_size);
  const std::vector<std::string> files = data::list_source_files(a.data);
  const bool jsonl = a.format == "jsonl" ||
                     (a.format == "auto" && std::all_of(files.begin(), files.end(), [](auto& f) {
                        return f.ends_with(".jsonl");
                      }));
  train::SavedModel m = a.model.load();
  const int64_t model_seq_len = m.model->config().seq_len;
  KILN_CHECK(a.seq_len >= 0 && a.seq_len <= model_seq_len, "--seq-len must be in [0, ",
             model_seq_len, "] (the model's), got ", a.seq_len);
  const int64_t seq_len = a.seq_len > 0 ? a.seq_len : model_seq_len;
  data::TextSourceOptions source;
  source.format = jsonl ? data::SourceFormat::jsonl : data::SourceFormat::text;
  source.text_key = a.text_key;
  const Tokenizer& tok = *m.tokenizer;
  std::vector<train::TokenSequence> sequences =
      a.format == "chat"
          ? train::document_sequences(
                data::read_chat_corpus(files, data::tokenizer_chat_template(m.tokenizer_path), tok,
                                       {data::parse_train_on(a.train_on), 0}),
                seq_len)
      : jsonl ? train::document_sequences(
                    data::TokenCorpus::from_documents(tokenize_documents(files, source, tok, true)),
                    seq_len)
              : packed_windows(tokenize_documents(files, source, tok, false), tok, seq_len);
  KILN_CHECK(!sequences.empty(), "no sequence to evaluate in ", files.size(),
             " file(s): every document has fewer than two tokens");
  for (const train::TokenSequence& s : sequences)
    for (int64_t id : s.ids)
      KILN_CHECK(id < m.model->config().vocab_size, "the data has token ", id,
                 ", beyond the model's vocabulary of ", m.model->config().vocab_size,
                 ": the tokenizer is not the model's");
  std::cerr << "evaluating " << m.description << " on " << sequences.size()
            << (a.format == "chat" ? " conversations" : jsonl ? " documents" : " packed windows")
            << std::endl;
  train::EvalResult r = train::evaluate(*m.model, sequences, a.batch_size, seq_len);
  const double tps = r.tokens / std::max(r.seconds, 1e-9);
  if (a.json) {
    std::cout << nlohmann::json{{"sequences", r.sequences}, {"tokens", r.tokens},
                                {"loss", r.loss}, {"perplexity", std::exp(r.loss)},
                                {"seconds", r.seconds}, {"tokens_per_second", tps}}
                     .dump()
              << std::endl;
    return;
  }
  std::cout << std::fixed << "sequences " << r.sequences << "  tokens " << r.tokens
            << "  loss " << std::setprecision(6) << r.loss << "  perplexity "
            << std::setprecision(4) << std::exp(r.loss) << "  tokens/s " << std::setprecision(0)
            << tps << std::endl;
}

}  // namespace

void add_eval(CLI::App& app) {
  auto args = std::make_shared<EvalArgs>();
  auto* cmd = app.add_subcommand("eval", "Mean loss and perplexity of a model on a dataset");
  args->model.add_options(*cmd);
  cmd->add_option("--data", args->data, "Text or JSONL files, or folders of them")->expected(1, -1);
  cmd->add_option("--format", args->format,
                  "text (packed into windows as training does), jsonl (each document one "
                  "sequence, truncated to --seq-len), chat (JSONL conversations rendered with the "
                  "chat template, the loss on --train-on tokens), auto (jsonl when every file is "
                  "*.jsonl)")
      ->capture_default_str();
  cmd->add_option("--train-on", args->train_on,
                  "chat: the tokens the loss is taken on: completion (the assistant's), prompt or "
                  "all, as in training")
      ->capture_default_str();
  cmd->add_option("--text-key", args->text_key, "The JSONL field holding a document's text")
      ->capture_default_str();
  cmd->add_option("--seq-len", args->seq_len, "Tokens per sequence; 0: the model's seq_len")
      ->capture_default_str();
  cmd->add_option("--batch-size", args->batch_size, "Sequences per batch")->capture_default_str();
  cmd->add_flag("--json", args->json, "Print one JSON object");
  cmd->callback([args] { eval(*args); });
}

}  // namespace kiln::cli
