// Splits a template into text and the tokens of its tags, as jinja2's lexer
// does with the settings transformers renders chat templates with:
// trim_blocks (the newline after a block or comment tag is dropped),
// lstrip_blocks (spaces before a block or comment tag on its own line are
// dropped), `-` / `+` whitespace control on tags, newlines normalized to
// "\n" and one trailing newline of the template dropped.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace kiln::data::jinja {

struct Token {
  enum class Kind : uint8_t {
    text,         // template data, whitespace control applied
    print_begin,  // {{
    print_end,    // }}
    block_begin,  // {%
    block_end,    // %}
    name,
    string,   // `text` is the literal's value, escapes decoded
    integer,  // `text` is the spelling, e.g. "0x1F" or "1_000"
    number,   // a float literal's spelling
    op,       // an operator or bracket: "+", "//", "(", ...
    eof,
  };
  Kind kind;
  std::string text;
  int line;
};

// Throws kiln::Error naming `template_name` and the line on a malformed tag
// and on `{% raw %}`, which this engine does not support.
std::vector<Token> lex(std::string_view source, const std::string& template_name);

}  // namespace kiln::data::jinja
