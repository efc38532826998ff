// The IR's text form: printer and parser.
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>

#include "kiln/base/error.h"
#include "kiln/ir/graph.h"

namespace kiln::ir {

std::string node_to_text(const Graph& g, const Node& n) {
  std::string s;
  for (size_t i = 0; i < n.outputs.size(); ++i)
    s += cat(i ? ", " : "", "%", n.outputs[i], ": ", to_string(g.type(n.outputs[i])));
  s += cat(n.outputs.empty() ? "" : " = ", n.op->name, "(");
  for (size_t i = 0; i < n.inputs.size(); ++i) s += cat(i ? ", " : "", "%", n.inputs[i]);
  s += ")";
  if (!n.attrs.items().empty()) {
    s += " {";
    bool first = true;
    for (const auto& [k, v] : n.attrs.items()) {
      s += cat(first ? "" : ", ", k, "=", to_string(v));
      first = false;
    }
    s += "}";
  }
  return s;
}

std::string to_text(const Graph& g) {
  std::string s = "graph(";
  for (size_t i = 0; i < g.inputs().size(); ++i)
    s += cat(i ? ", " : "", "%", g.inputs()[i], ": ", to_string(g.type(g.inputs()[i])));
  s += ") {\n";
  for (const Node& n : g.nodes()) s += "  " + node_to_text(g, n) + "\n";
  s += "  return";
  for (size_t i = 0; i < g.outputs().size(); ++i) s += cat(i ? ", %" : " %", g.outputs()[i]);
  return s + "\n}\n";
}

namespace {

class Parser {
 public:
  explicit Parser(std::string_view text) : t_(text) {}

  Graph parse() {
    expect_word("graph");
    expect('(');
    if (!accept(')')) {
      do {
        int64_t name = value_name();
        expect(':');
        bind(name, g_.add_input(type()));
      } while (accept(','));
      expect(')');
    }
    expect('{');
    while (true) {
      skip_space();
      if (peek_word("return")) break;
      node();
    }
    expect_word("return");
    std::vector<ValueId> outs;
    skip_space();
    if (peek() == '%') {
      do outs.push_back(use(value_name()));
      while (accept(','));
    }
    expect('}');
    skip_space();
    if (pos_ != t_.size()) error("unexpected text after the closing '}'");
    g_.set_outputs(std::move(outs));
    return std::move(g_);
  }

 private:
  void node() {
    std::vector<int64_t> names;
    std::vector<TypeInfo> types;
    skip_space();
    if (peek() == '%') {
      do {
        names.push_back(value_name());
        expect(':');
        types.push_back(type());
      } while (accept(','));
      expect('=');
    }
    std::string opname = word();
    const OpDef* op = find_op(opname);
    if (!op) error(cat("unknown op '", opname, "'"));
    expect('(');
    std::vector<ValueId> inputs;
    if (!accept(')')) {
      do inputs.push_back(use(value_name()));
      while (accept(','));
      expect(')');
    }
    Attrs attrs;
    if (accept('{')) {
      do {
        std::string key = word();
        expect('=');
        attrs.set(key, attr_value());
      } while (accept(','));
      expect('}');
    }
    // Unknown attributes are rejected here; omitted ones take their defaults.
    try {
      attrs = op->complete_attrs(attrs);
    } catch (const Error& e) {
      error(e.what());
    }
    const Node& n = g_.add_node_typed(*op, std::move(inputs), std::move(attrs), types);
    for (size_t i = 0; i < names.size(); ++i) bind(names[i], n.outputs[i]);
  }

  AttrValue attr_value() {
    skip_space();
    char c = peek();
    if (c == '"') {
      ++pos_;
      std::string s;
      while (pos_ < t_.size() && t_[pos_] != '"') {
        if (t_[pos_] == '\\') ++pos_;
        if (pos_ < t_.size()) s += t_[pos_++];
      }
      expect('"');
      return s;
    }
    if (c == '[') {
      ++pos_;
      IntList l;
      if (!accept(']')) {
        do l.push_back(integer());
        while (accept(','));
        expect(']');
      }
      return l;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) && !peek_word("inf") && !peek_word("nan")) {
      std::string w = word();
      if (w == "true") return true;
      if (w == "false") return false;
      return parse_dtype(w);
    }
    return number();
  }

  // Reads one numeric literal; integers keep their full 64-bit value.
  AttrValue number() {
    skip_space();
    size_t start = pos_;
    while (pos_ < t_.size() && (std::isalnum(static_cast<unsigned char>(t_[pos_])) ||
                                std::string_view("+-.").find(t_[pos_]) != std::string_view::npos))
      ++pos_;
    std::string lit(t_.substr(start, pos_ - start));
    if (lit.empty()) error("expected a number");
    char* end = nullptr;
    bool is_int = lit.find_first_of(".eEni") == std::string::npos;
    errno = 0;
    AttrValue v = is_int ? AttrValue(static_cast<int64_t>(std::strtoll(lit.c_str(), &end, 10)))
                         : AttrValue(std::strtod(lit.c_str(), &end));
    if (end != lit.c_str() + lit.size()) error(cat("malformed number '", lit, "'"));
    if (is_int && errno == ERANGE) error(cat("integer '", lit, "' is out of the 64-bit range"));
    return v;
  }
  int64_t integer() {
    AttrValue v = number();
    if (!std::holds_alternative<int64_t>(v)) error("expected an integer");
    return std::get<int64_t>(v);
  }

  TypeInfo type() {
    TypeInfo t;
    t.dtype = parse_dtype(word());
    expect('[');
    if (!accept(']')) {
      int64_t elements = 1;
      do {
        const int64_t d = integer();
        if (d < 0 || __builtin_mul_overflow(elements, d, &elements))
          error(cat("a shape's dims must be non-negative, with fewer than 2^63 elements; not ", d));
        t.shape.push_back(d);
      } while (accept(','));
      expect(']');
    }
    return t;
  }

  int64_t value_name() {
    expect('%');
    size_t start = pos_;
    while (pos_ < t_.size() && std::isdigit(static_cast<unsigned char>(t_[pos_]))) ++pos_;
    if (start == pos_) error("expected a value number after '%'");
    return std::strtoll(std::string(t_.substr(start, pos_ - start)).c_str(), nullptr, 10);
  }

  void bind(int64_t name, ValueId v) {
    if (!names_.emplace(name, v).second) error(cat("%", name, " is defined twice"));
  }
  ValueId use(int64_t name) {
    auto it = names_.find(name);
    if (it == names_.end()) error(cat("%", name, " is used before it is defined"));
    return it->second;
  }

  std::string word() {
    skip_space();
    size_t start = pos_;
    while (pos_ < t_.size() && (std::isalnum(static_cast<unsigned char>(t_[pos_])) || t_[pos_] == '_' ||
                                t_[pos_] == '.'))
      ++pos_;
    if (start == pos_) error("expected a name");
    return std::string(t_.substr(start, pos_ - start));
  }
  bool peek_word(std::string_view w) {
    skip_space();
    return t_.substr(pos_, w.size()) == w &&
           (pos_ + w.size() == t_.size() || !std::isalnum(static_cast<unsigned char>(t_[pos_ + w.size()])));
  }
  void expect_word(std::string_view w) {
    if (word() != w) error(cat("expected '", w, "'"));
  }
  char peek() { return pos_ < t_.size() ? t_[pos_] : '\0'; }
  bool accept(char c) {
    skip_space();
    if (peek() != c) return false;
    ++pos_;
    return true;
  }
  void expect(char c) {
    if (!accept(c)) error(cat("expected '", c, "'"));
  }
  void skip_space() {
    while (pos_ < t_.size() && std::isspace(static_cast<unsigned char>(t_[pos_]))) ++pos_;
  }
  [[noreturn]] void error(const std::string& msg) {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos_ && i < t_.size(); ++i) {
      if (t_[i] == '\n') ++line, col = 1;
      else ++col;
    }
    fail("IR text, line ", line, ", column ", col, ": ", msg);
  }

  std::string_view t_;
  size_t pos_ = 0;
  Graph g_;
  std::map<int64_t, ValueId> names_;
};

}  // namespace

Graph parse_graph(std::string_view text) { return Parser(text).parse(); }

}  // namespace kiln::ir
