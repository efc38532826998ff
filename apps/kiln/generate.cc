// `kiln generate`: continues a prompt (streaming the text to stdout as it is
// decoded) or a file of prompts in batches (one JSON line per prompt), from
// a trained checkpoint or a Hugging Face model folder.
#include "kiln/models/generate.h"

#include <algorithm>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "apps/kiln/commands.h"
#include "apps/kiln/model_source.h"
#include "kiln/base/error.h"
#include "kiln/data/chat_data.h"

namespace kiln::cli {
namespace {

struct GenerateArgs {
  ModelSource model;
  std::optional<std::string> prompt;  // "" is a prompt: the document-start token alone
  std::string prompts_file, output = "text";
  bool chat = false;
  bool replay = false;
  std::vector<std::string> stop;
  int64_t max_length = 0;  // 0: the prompt and the new tokens, rounded up
  int64_t batch_size = 8;
  GenerationOptions gen{.max_new_tokens = 100, .sampling = {0.8, 0, 1.0}};
};

// The prompts of a --prompts file: one JSON object per line with a string
// "prompt" or, with --chat, a conversation "messages"; blank lines are skipped.
std::vector<nlohmann::ordered_json> read_prompts(const std::string& path, bool chat) {
  std::ifstream f(path);
  KILN_CHECK(f.good(), "cannot read the prompts file '", path, "'");
  std::vector<nlohmann::ordered_json> prompts;
  std::string line;
  for (int64_t n = 1; std::getline(f, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::ordered_json j;
    try {
      j = nlohmann::ordered_json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      fail(path, ":", n, ": not valid JSON: ", e.what());
    }
    const bool text = j.is_object() && j.contains("prompt") && j["prompt"].is_string();
    const bool messages = chat && j.is_object() && j.contains("messages");
    KILN_CHECK(text || messages, path, ":", n, ": each line must be a JSON object with a string "
               "\"prompt\"", chat ? " or a conversation \"messages\"" : "");
    prompts.push_back(messages ? j["messages"] : j["prompt"]);
  }
  KILN_CHECK(!prompts.empty(), "the prompts file '", path, "' has no prompts");
  return prompts;
}

// Text and stop strings: a completion's text ends before the first stop
// string in it; while streaming, the bytes that could begin one wait.
class StopStrings {
 public:
  explicit StopStrings(std::vector<std::string> stop) : stop_(std::move(stop)) {
    for (const std::string& s : stop_) KILN_CHECK(!s.empty(), "--stop strings must not be empty");
  }
  // Where `text` must end: at the first stop string, or its end.
  size_t end_of(const std::string& text) const {
    size_t end = text.size();
    for (const std::string& s : stop_) end = std::min(end, text.find(s));
    return end;
  }
  bool found(const std::string& text) const { return end_of(text) < text.size(); }
  // How much of an unfinished `text` is safe to print: not a trailing
  // U+FFFD (a character whose other bytes are still to come), nor the
  // bytes a stop string could start with.
  size_t printable(const std::string& text) const {
    size_t n = end_of(text);
    if (std::string_view(text).substr(0, n).ends_with("\xEF\xBF\xBD")) n -= 3;
    size_t hold = 0;
    for (const std::string& s : stop_) hold = std::max(hold, s.size() - 1);
    return n - std::min(n, hold);
  }

 private:
  std::vector<std::string> stop_;
};

// A prompt's ids: its text after the tokenizer's document-start token or,
// in chat mode, the conversation (a text is one user message) rendered by
// the chat template up to the assistant's turn.
std::vector<int32_t> encode_prompt(const Tokenizer& tok, const nlohmann::ordered_json& prompt,
                                   const data::ChatTemplate* chat, int64_t vocab) {
  std::vector<int32_t> ids;
  if (chat) {
    nlohmann::ordered_json messages =
        prompt.is_string() ? nlohmann::ordered_json::array({{{"role", "user"}, {"content", prompt}}})
                           : prompt;
    data::check_messages(messages);
    ids = tok.encode(chat->render(messages, /*add_generation_prompt=*/true));
  } else {
    if (auto bos = bos_token_id(tok)) ids.push_back(*bos);
    tok.encode(prompt.get<std::string>(), ids);
  }
  KILN_CHECK(!ids.empty(), "a prompt is empty and the tokenizer has no document-start token");
  for (int32_t id : ids)
    KILN_CHECK(id < vocab, "a prompt has token ", id, " ('", tok.id_to_token(id),
               "'), beyond the model's vocabulary of ", vocab, ": the tokenizer is not the model's");
  return ids;
}

// The decoder's bound when --max-length is not given: the longest prompt and
// the new tokens, rounded up to a multiple of 256 so that nearby lengths
// share their programs (in the compile cache, across runs too).
int64_t cache_length(const GenerateArgs& a, size_t longest_prompt, int64_t seq_len) {
  KILN_CHECK(int64_t(longest_prompt) <= seq_len, "a prompt is ", longest_prompt,
             " tokens, more than the model's sequence length of ", seq_len);
  KILN_CHECK(a.max_length >= 0 && a.max_length <= seq_len, "--max-length must be in [0, ", seq_len,
             "] (the model's sequence length), got ", a.max_length);
  KILN_CHECK(a.max_length == 0 || int64_t(longest_prompt) <= a.max_length, "a prompt is ",
             longest_prompt, " tokens, more than --max-length ", a.max_length);
  if (a.max_length > 0) return a.max_length;
  const int64_t need = int64_t(longest_prompt) + std::max<int64_t>(a.gen.max_new_tokens, 1);
  return std::min(seq_len, (need + 255) / 256 * 256);
}

nlohmann::json completion_json(size_t index, const Completion& c, const std::string& text,
                               const std::string& output) {
  nlohmann::json j = {{"index", index}, {"text", text}, {"finish_reason", c.finish_reason}};
  if (output != "text") j["ids"] = c.ids;
  if (output == "logprobs") j["logprobs"] = c.logprobs;
  return j;
}

void generate(const GenerateArgs& a) {
  a.model.check();
  KILN_CHECK(a.prompt.has_value() == a.prompts_file.empty(),
             "kiln generate needs exactly one of --prompt TEXT and --prompts FILE");
  KILN_CHECK(a.output == "text" || a.output == "ids" || a.output == "logprobs",
             "--output must be text, ids or logprobs, got '", a.output, "'");
  KILN_CHECK(a.batch_size >= 1, "--batch-size must be >= 1, got ", a.batch_size);
  KILN_CHECK(a.gen.max_new_tokens >= 0, "--max-new-tokens must be >= 0, got ", a.gen.max_new_tokens);
  check_sampling(a.gen.sampling);  // before the model loads, which takes a while
  const StopStrings stop(a.stop);
  std::vector<nlohmann::ordered_json> texts =
      a.prompts_file.empty() ? std::vector<nlohmann::ordered_json>{*a.prompt}
                             : read_prompts(a.prompts_file, a.chat);
  train::SavedModel m = a.model.load();
  const Tokenizer& tok = *m.tokenizer;
  const int64_t vocab = m.model->config().vocab_size;
  std::optional<data::ChatTemplate> chat;
  if (a.chat) chat = data::tokenizer_chat_template(m.tokenizer_path);
  std::vector<std::vector<int32_t>> prompts;
  size_t longest = 0;
  for (const nlohmann::ordered_json& t : texts) {
    prompts.push_back(encode_prompt(tok, t, chat ? &*chat : nullptr, vocab));
    longest = std::max(longest, prompts.back().size());
  }
  GenerationOptions gen = a.gen;
  gen.eos_ids = m.eos_ids;
  if (chat) gen.eos_ids.push_back(data::assistant_end_token(*chat, tok));  // the reply's end
  // Ids the tokenizer has no token for (models pad their vocabulary, e.g.
  // Qwen3's 151,936 for 151,669 tokens) are never drawn: they decode to nothing.
  for (int32_t id = 0; id < vocab; ++id)
    if (!tok.has_id(id)) gen.banned_ids.push_back(id);
  const int64_t rows = std::min<int64_t>(a.batch_size, int64_t(prompts.size()));
  KVCacheDecoder decoder(*m.model, rows, cache_length(a, longest, m.model->config().seq_len),
                         a.replay);
  std::cerr << "generating from " << m.description << std::endl;

  auto text_of = [&](const Completion& c) {
    return tok.decode(c.ids, /*skip_special_tokens=*/true);
  };
  if (a.prompts_file.empty() && a.output == "text") {  // one prompt, streamed
    if (!chat) std::cout << *a.prompt << std::flush;  // a chat prints the reply alone
    size_t printed = 0;
    Completion c = generate(decoder, prompts, gen, [&](size_t, const Completion& so_far) {
      const std::string text = text_of(so_far);
      if (stop.found(text)) return true;
      size_t n = stop.printable(text);
      if (n > printed) std::cout << text.substr(printed, n - printed) << std::flush, printed = n;
      return false;
    })[0];
    std::string text = text_of(c);
    text.resize(stop.end_of(text));
    std::cout << text.substr(std::min(printed, text.size())) << std::endl;
    return;
  }
  for (size_t first = 0; first < prompts.size(); first += size_t(rows)) {
    const size_t last = std::min(prompts.size(), first + size_t(rows));
    std::vector<std::vector<int32_t>> batch(prompts.begin() + long(first), prompts.begin() + long(last));
    GenerationOptions batch_gen = gen;
    batch_gen.seed = gen.seed + first;  // prompt i draws with seed + i, whatever the batch size
    std::vector<Completion> done = generate(
        decoder, batch, batch_gen,
        [&](size_t, const Completion& so_far) { return stop.found(text_of(so_far)); });
    for (size_t i = 0; i < done.size(); ++i) {
      std::string text = text_of(done[i]);
      text.resize(stop.end_of(text));
      std::cout << completion_json(first + i, done[i], text, a.output).dump() << std::endl;
    }
  }
}

}  // namespace

void add_generate(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  auto* cmd = app.add_subcommand("generate", "Sample text from a trained model");
  args->model.add_options(*cmd);
  cmd->add_option("--prompt", args->prompt, "The text to continue (streamed to stdout)");
  cmd->add_option("--prompts", args->prompts_file,
                  "A JSON-lines file of prompts ({\"prompt\": TEXT} per line), run in batches; "
                  "one JSON line per prompt on stdout (index, text, finish_reason)");
  cmd->add_flag("--chat", args->chat,
                "Apply the tokenizer's chat template (tokenizer_config.json): --prompt is a user "
                "message, --prompts lines may hold {\"messages\": [...]}; a reply ends at the "
                "token that closes the assistant's turn");
  cmd->add_option("--batch-size", args->batch_size, "Prompts decoded together (--prompts)")
      ->capture_default_str();
  cmd->add_option("--output", args->output,
                  "text, ids (JSON lines with the token ids too) or logprobs (and each "
                  "token's log-probability under the model)")
      ->capture_default_str();
  cmd->add_option("--stop", args->stop,
                  "Stop a completion at this string (repeatable); the text ends before it");
  cmd->add_option("--max-new-tokens", args->gen.max_new_tokens, "Tokens to generate at most")
      ->capture_default_str();
  cmd->add_option("--max-length", args->max_length,
                  "Tokens the decoder's cache holds (prompt and new ones); prompts are padded "
                  "to it, so every prompt length runs the same compiled programs. 0: the longest "
                  "prompt and --max-new-tokens rounded up to a multiple of 256, at most the "
                  "model's seq_len")
      ->capture_default_str();
  cmd->add_flag("--replay", args->replay,
                "Record the decode step's program once and replay it for every token: on a GPU "
                "each token is one CUDA graph launch (kiln/runtime/executable.h)");
  cmd->add_option("--temperature", args->gen.sampling.temperature,
                  "Sampling temperature; 0 is greedy")
      ->capture_default_str();
  cmd->add_option("--top-k", args->gen.sampling.top_k,
                  "Sample among the k most likely tokens; 0: all")
      ->capture_default_str();
  cmd->add_option("--top-p", args->gen.sampling.top_p, "Nucleus sampling threshold in (0, 1]")
      ->capture_default_str();
  cmd->add_option("--seed", args->gen.seed, "Sampling seed (prompt i of a file draws with seed + i)")
      ->capture_default_str();
  cmd->callback([args] { generate(*args); });
}

}  // namespace kiln::cli
