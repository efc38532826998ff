#include "kiln/data/chat_data.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "kiln/base/error.h"

namespace kiln::data {

ChatTemplate tokenizer_chat_template(const std::string& tokenizer_path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path dir = fs::is_directory(tokenizer_path, ec) ? fs::path(tokenizer_path)
                                                             : fs::path(tokenizer_path).parent_path();
  const fs::path config = dir / "tokenizer_config.json";
  KILN_CHECK(fs::is_regular_file(config, ec), "the tokenizer '", tokenizer_path,
             "' has no tokenizer_config.json beside it, so no chat template");
  return ChatTemplate::from_tokenizer_config(config);
}

TrainOn parse_train_on(std::string_view name) {
  if (name == "completion") return TrainOn::completion;
  if (name == "prompt") return TrainOn::prompt;
  if (name == "all") return TrainOn::all;
  fail("train_on must be completion, prompt or all, got '", name, "'");
}

EncodedChat encode_chat(const ChatTemplate& chat_template, const Tokenizer& tokenizer,
                        const nlohmann::ordered_json& messages, TrainOn train_on) {
  check_messages(messages);
  const std::string text = chat_template.render(messages, /*add_generation_prompt=*/false);
  EncodedChat out{tokenizer.encode(text), {}};
  out.trained.assign(out.ids.size(), train_on == TrainOn::completion ? 0 : 1);
  if (train_on == TrainOn::all) return out;
  std::vector<uint8_t> assistant(out.ids.size(), 0);
  for (size_t i = 0; i < messages.size(); ++i) {
    if (messages[i]["role"] != "assistant") continue;
    KILN_CHECK(i > 0, "message 0 is the assistant's: a conversation to train on starts with a "
               "prompt");
    const nlohmann::ordered_json before(messages.begin(), messages.begin() + long(i));
    const std::string prompt = chat_template.render(before, /*add_generation_prompt=*/true);
    KILN_CHECK(text.starts_with(prompt), "message ", i,
               " (assistant): the chat template renders the conversation before it differently "
               "once it follows, so its tokens cannot be told apart; use --data.train_on all");
    const std::vector<int32_t> head = tokenizer.encode(prompt);
    KILN_CHECK(std::equal(head.begin(), head.end(), out.ids.begin()), "message ", i,
               " (assistant): the generation prompt before it does not end on a token boundary "
               "of the whole conversation; use --data.train_on all");
    size_t end = head.size();
    while (end < out.ids.size() && !tokenizer.is_special(out.ids[end])) ++end;
    KILN_CHECK(end < out.ids.size(), "message ", i,
               " (assistant): no special token closes it in the rendered conversation");
    std::fill(assistant.begin() + long(head.size()), assistant.begin() + long(end) + 1, 1);
  }
  for (size_t t = 0; t < out.ids.size(); ++t)
    out.trained[t] = train_on == TrainOn::completion ? assistant[t] : !assistant[t];
  return out;
}

int32_t assistant_end_token(const ChatTemplate& chat_template, const Tokenizer& tokenizer) {
  const nlohmann::ordered_json probe = nlohmann::ordered_json::parse(
      R"([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}])");
  EncodedChat c = encode_chat(chat_template, tokenizer, probe, TrainOn::completion);
  for (size_t t = c.ids.size(); t-- > 0;)
    if (c.trained[t]) return c.ids[t];
  fail("the chat template renders no assistant turn");
}

TokenCorpus read_chat_corpus(const std::vector<std::string>& files, const ChatTemplate& chat_template,
                             const Tokenizer& tokenizer, const ChatDataOptions& options) {
  std::vector<std::vector<int32_t>> docs;
  std::vector<std::vector<uint8_t>> masks;
  for (const std::string& file : files) {
    std::ifstream f(file);
    KILN_CHECK(f.good(), "cannot read chat data '", file, "'");
    std::string line;
    for (int64_t n = 1; std::getline(f, line); ++n) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      try {
        nlohmann::ordered_json j = nlohmann::ordered_json::parse(line);
        KILN_CHECK(j.is_object() && j.contains("messages"),
                   "each line must be a JSON object with \"messages\"");
        EncodedChat c = encode_chat(chat_template, tokenizer, j["messages"], options.train_on);
        KILN_CHECK(options.max_tokens == 0 || int64_t(c.ids.size()) <= options.max_tokens,
                   "the conversation is ", c.ids.size(), " tokens, more than the ",
                   options.max_tokens, " a sequence holds (training.seq_len + 1): shorten it or "
                   "raise --training.seq_len");
        docs.push_back(std::move(c.ids));
        masks.push_back(std::move(c.trained));
      } catch (const nlohmann::json::exception& e) {
        fail(file, ":", n, ": not valid JSON: ", e.what());
      } catch (const Error& e) {
        fail(file, ":", n, ": ", e.what());
      }
    }
  }
  KILN_CHECK(!docs.empty(), "no conversation in the chat data (", files.size(), " file(s))");
  const bool any_trained = std::any_of(masks.begin(), masks.end(), [](const auto& m) {
    return std::find(m.begin(), m.end(), 1) != m.end();
  });
  KILN_CHECK(any_trained, "no token of the chat data's ", docs.size(), " conversation(s) is "
             "trained on: with data.train_on = completion the loss is taken on assistant "
             "messages, and there are none");
  return TokenCorpus::from_documents(docs, masks);
}

}  // namespace kiln::data
