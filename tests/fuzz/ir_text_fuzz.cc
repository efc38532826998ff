// The IR's text form (ir/graph.h), as compile-cache entries hold it: a
// graph that parses and verifies prints as text that parses to itself.
#include "kiln/ir/graph.h"
#include "tests/fuzz/fuzz_target.h"

KILN_FUZZ_TARGET(input) {
  kiln::ir::Graph g = kiln::ir::parse_graph(kiln::fuzz::as_text(input));
  kiln::ir::verify(g);
  const std::string text = kiln::ir::to_text(g);
  kiln::ir::Graph back =
      kiln::fuzz::reparse(text, [](const std::string& t) { return kiln::ir::parse_graph(t); });
  kiln::fuzz::check(kiln::ir::to_text(back) == text, "a verified graph's text parses to another");
}
