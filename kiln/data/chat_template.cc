#include "kiln/data/chat_template.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "kiln/base/error.h"

namespace kiln::data {

using json = nlohmann::ordered_json;
namespace fs = std::filesystem;

namespace {

json read_json(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  KILN_CHECK(in, path.string(), ": cannot open: ", std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  try {
    return json::parse(text.str());
  } catch (const json::exception& e) {
    fail(path.string(), ": not valid JSON (", e.what(), ")");
  }
}

// bos_token / eos_token: a string, an added token {"content": ...}, or absent.
std::string token_text(const json& config, const char* key, const fs::path& path) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  auto content = it->is_object() ? it->find("content") : it->end();
  KILN_CHECK(it->is_object() && content != it->end() && content->is_string(), path.string(), ": ", key,
             " must be a string or an object with a string \"content\"");
  return content->get<std::string>();
}

// transformers saves the template as chat_template.jinja beside the config
// (and reads that file first); older folders keep it in the config.
std::string template_source(const json& config, const fs::path& path) {
  const fs::path file = path.parent_path() / "chat_template.jinja";
  std::error_code ec;
  if (fs::is_regular_file(file, ec)) {
    std::ifstream in(file, std::ios::binary);
    KILN_CHECK(in.good(), "cannot read ", file.string());
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  auto it = config.find("chat_template");
  KILN_CHECK(it != config.end() && !it->is_null(), path.string(),
             ": no chat_template, and no chat_template.jinja beside it (this tokenizer has no chat "
             "template to render conversations with)");
  if (it->is_string()) return it->get<std::string>();
  KILN_CHECK(it->is_array(), path.string(), ": chat_template must be a string or a list of {\"name\", \"template\"}");
  std::string names;
  for (const json& entry : *it) {
    KILN_CHECK(entry.is_object() && entry.contains("name") && entry.contains("template") &&
                   entry["name"].is_string() && entry["template"].is_string(),
               path.string(), ": each chat_template entry must be {\"name\": string, \"template\": string}");
    if (entry["name"] == "default") return entry["template"].get<std::string>();
    names += (names.empty() ? "" : ", ") + entry["name"].get<std::string>();
  }
  fail(path.string(), ": chat_template has no template named \"default\" (it has: ", names, ")");
}

// transformers copies a message's reasoning, under any of the names it is
// passed as, to "reasoning_content" (what templates read) and "thinking".
json alias_reasoning(json message) {
  for (const char* key : {"reasoning_content", "thinking", "reasoning"}) {
    auto it = message.find(key);
    if (it == message.end() || it->is_null()) continue;
    json reasoning = *it;
    if (!message.contains("thinking")) message["thinking"] = reasoning;
    message["reasoning_content"] = std::move(reasoning);
    break;
  }
  return message;
}

}  // namespace

ChatTemplate ChatTemplate::from_tokenizer_config(const fs::path& tokenizer_config_json) {
  json config = read_json(tokenizer_config_json);
  KILN_CHECK(config.is_object(), tokenizer_config_json.string(), ": must hold a JSON object");
  std::string source = template_source(config, tokenizer_config_json);
  std::string bos = token_text(config, "bos_token", tokenizer_config_json);
  std::string eos = token_text(config, "eos_token", tokenizer_config_json);
  try {
    return ChatTemplate(std::move(source), std::move(bos), std::move(eos));
  } catch (const Error& e) {  // the template's own errors: say which file holds it
    fail(tokenizer_config_json.string(), ": ", e.what());
  }
}

ChatTemplate::ChatTemplate(std::string source, std::string bos_token, std::string eos_token)
    : template_(source, "chat template"), bos_token_(std::move(bos_token)), eos_token_(std::move(eos_token)) {}

std::string ChatTemplate::render(const json& messages, bool add_generation_prompt, const json& extra) const {
  KILN_CHECK(messages.is_array(), "chat template: messages must be a list of message objects, not ",
             messages.type_name());
  KILN_CHECK(extra.is_object(), "chat template: the extra variables must be a JSON object, not ", extra.type_name());
  json chat = json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    KILN_CHECK(messages[i].is_object(), "chat template: messages[", i, "] must be an object, not ",
               messages[i].type_name());
    chat.push_back(alias_reasoning(messages[i]));
  }
  json context = {{"messages", std::move(chat)},
                  {"add_generation_prompt", add_generation_prompt},
                  {"tools", nullptr},
                  {"documents", nullptr}};
  if (!bos_token_.empty()) context["bos_token"] = bos_token_;
  if (!eos_token_.empty()) context["eos_token"] = eos_token_;
  for (const auto& [key, value] : extra.items()) {
    KILN_CHECK(key != "messages" && key != "add_generation_prompt", "chat template: extra must not set \"", key,
               "\": it is an argument of render()");
    context[key] = value;
  }
  return template_.render(context);
}

void check_messages(const json& messages) {
  KILN_CHECK(messages.is_array(), "messages must be a list of {\"role\", \"content\"} objects, not ",
             messages.type_name());
  KILN_CHECK(!messages.empty(), "messages is empty: a conversation needs at least one message");
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    KILN_CHECK(m.is_object(), "messages[", i, "] must be an object with \"role\" and \"content\", not ",
               m.type_name());
    for (const char* key : {"role", "content"}) {
      auto it = m.find(key);
      KILN_CHECK(it != m.end(), "messages[", i, "] has no \"", key, "\"");
      KILN_CHECK(it->is_string(), "messages[", i, "].", key, " must be a string, not ", it->type_name());
    }
  }
}

}  // namespace kiln::data
