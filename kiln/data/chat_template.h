// Chat templates of Hugging Face tokenizers: a conversation rendered to the
// text the model is trained on or prompted with, as transformers'
// tokenizer.apply_chat_template(messages, tokenize=False, ...) renders it.
#pragma once
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "kiln/data/jinja.h"

namespace kiln::data {

class ChatTemplate {
 public:
  // From a tokenizer_config.json: its chat_template (a string, or a list of
  // {"name", "template"} of which "default" is used), bos_token and
  // eos_token (strings or {"content": ...} objects). kiln::Error naming the
  // file when there is no chat_template.
  static ChatTemplate from_tokenizer_config(const std::filesystem::path& tokenizer_config_json);

  // An empty token is left out of the template's variables, as transformers
  // leaves out a token the tokenizer does not have.
  ChatTemplate(std::string source, std::string bos_token, std::string eos_token);

  // apply_chat_template(messages, tokenize=False, add_generation_prompt=...):
  // the template sees messages, add_generation_prompt, bos_token, eos_token,
  // tools and documents (None), then the keys of `extra` (e.g.
  // enable_thinking, tools), which replace those of the same name.
  // `messages` must be a list of objects; check_messages checks more.
  // Objects keep their keys' order, as Python's dicts do (`tojson` of a
  // tool call's arguments prints them in that order).
  std::string render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                     const nlohmann::ordered_json& extra = nlohmann::ordered_json::object()) const;

 private:
  JinjaTemplate template_;
  std::string bos_token_, eos_token_;
};

// Checks a conversation before rendering: messages is a non-empty array of
// objects each with a string "role" and a string "content"; kiln::Error
// naming the message index and what is wrong otherwise.
void check_messages(const nlohmann::ordered_json& messages);

}  // namespace kiln::data
