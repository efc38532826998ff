// Chat templates (data/chat_template.h): a tokenizer_config.json's
// chat_template is a program from a download. The input is a template, then
// (after a line "---") the messages as JSON; a template that parses renders
// the same text twice, and never runs away (the engine's bounds on
// statements and sizes turn runaway loops into a kiln::Error).
#include <nlohmann/json.hpp>

#include "kiln/data/chat_template.h"
#include "tests/fuzz/fuzz_target.h"

KILN_FUZZ_TARGET(input) {
  std::string_view text = kiln::fuzz::as_text(input);
  const size_t cut = text.find("\n---\n");
  std::string source(text.substr(0, cut));
  nlohmann::json messages = nlohmann::json::array(
      {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hi"}},
       {{"role", "assistant"}, {"content", "<think>\nhm\n</think>\n\nHello"}}});
  if (cut != std::string_view::npos) {
    nlohmann::json given = nlohmann::json::parse(text.substr(cut + 5), nullptr, false);
    if (given.is_array()) messages = std::move(given);
  }
  kiln::data::ChatTemplate chat(source, "<s>", "</s>");
  const bool prompt = !source.empty() && (source[0] & 1);
  const std::string once = chat.render(messages, prompt);
  kiln::fuzz::check(chat.render(messages, prompt) == once, "rendering twice gave different text");
}
