// A Jinja template engine for the subset of jinja2 that Hugging Face chat
// templates use, with the settings transformers renders them with
// (trim_blocks, lstrip_blocks, its `tojson` and `raise_exception`).
//
// Supported: text, {{ }}, {% %}, {# #}, `-` / `+` whitespace control;
// if / elif / else, for (with `loop`, `else`, a filter `if`, unpacking,
// break / continue), set (also `set ns.attr` and `{% set x %}...{% endset %}`),
// macro, transformers' {% generation %}; literals, arithmetic, `~`,
// comparisons, and / or / not, in / not in, `is` tests, attributes,
// subscripts, slices, `a if c else b`; the filters, tests, globals and str /
// dict methods of jinja_builtins.cc. Values are JSON plus jinja2's
// Undefined (falsy, prints as "", fails in arithmetic and on attribute
// access), namespace() objects and the loop object.
//
// Anything else (include, extends, block, call, filter blocks, raw, other
// filters or methods, `%` string formatting) is a kiln::Error naming the
// construct and the template line: "chat template line 3: unsupported
// filter 'wordwrap'". So is an error the template raises, such as
// raise_exception('...') with its message.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace kiln::data {

namespace jinja {
struct Program;
}

class JinjaTemplate {
 public:
  // Parses `source`; `name` starts every error message. Throws kiln::Error
  // on a syntax error or an unsupported construct anywhere in it.
  explicit JinjaTemplate(std::string_view source, std::string name = "template");

  // Renders with the keys of `context` (a JSON object) as variables. The
  // template may be rendered many times, also from several threads at once.
  // Objects keep their keys' order (as Python's dicts do), which is what
  // `tojson` and `items()` then see.
  std::string render(const nlohmann::ordered_json& context) const;

 private:
  std::shared_ptr<const jinja::Program> program_;
};

}  // namespace kiln::data
