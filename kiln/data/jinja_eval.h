// Runs a parsed template over a context: a tree-walking interpreter with
// jinja2's scoping. Each iteration of a for loop is a new scope (a `set`
// inside it is gone after it, hence `namespace()`), `if` makes none, and a
// macro sees its arguments and the template's top level.
#pragma once
#include <string>

#include "kiln/data/jinja_ast.h"

namespace kiln::data::jinja {

// `context` is a JSON object: its keys are the template's variables.
// Throws kiln::Error "<name> line N: ..." on an error in the template.
std::string render(const Program& program, Json context);

}  // namespace kiln::data::jinja
