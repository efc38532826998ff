// Parses a template into its tree, following jinja2's grammar and operator
// precedence. Tags, filters and tests this engine does not run are refused
// here, once, with the template line, rather than when a render reaches them.
#pragma once
#include <string>
#include <string_view>

#include "kiln/data/jinja_ast.h"

namespace kiln::data::jinja {

// Throws kiln::Error "<name> line N: ..." on a syntax error or an
// unsupported construct.
Program parse(std::string_view source, std::string name);

}  // namespace kiln::data::jinja
