#include "kiln/data/jinja_parser.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <initializer_list>
#include <optional>

#include "kiln/data/jinja_builtins.h"
#include "kiln/data/jinja_error.h"
#include "kiln/data/jinja_lexer.h"

namespace kiln::data::jinja {

namespace {

using Tags = std::initializer_list<std::string_view>;

// Tags that only close or continue another: met on their own they are misplaced.
constexpr std::string_view kInnerTags[] = {"elif", "else", "endif", "endfor", "endset", "endmacro", "endgeneration"};

ExprPtr node(Expr::Kind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

ExprPtr literal(Json value, int line) {
  ExprPtr e = node(Expr::Kind::literal, line);
  e->value = std::move(value);
  return e;
}

class Parser {
 public:
  Parser(std::vector<Token> tokens, const std::string& name) : toks_(std::move(tokens)), name_(name) {}

  Body run() { return subparse({}); }

 private:
  // ---- statements ----

  // Statements up to a {% tag %} named in `end` (left as the current token),
  // or to the end of the template when `end` is empty.
  Body subparse(Tags end) {
    Body body;
    for (;;) {
      const Token& t = cur();
      if (t.kind == Token::Kind::text) {
        Stmt s = stmt(Stmt::Kind::text, t.line);
        s.text = t.text;
        body.push_back(std::move(s));
        ++i_;
      } else if (t.kind == Token::Kind::print_begin) {
        ++i_;
        Stmt s = stmt(Stmt::Kind::output, t.line);
        s.expr = tuple(true);
        expect(Token::Kind::print_end, "}}");
        body.push_back(std::move(s));
      } else if (t.kind == Token::Kind::block_begin) {
        ++i_;
        if (cur().kind != Token::Kind::name) error("expected a tag name after {%");
        for (std::string_view tag : end)
          if (cur().text == tag) return body;
        body.push_back(statement());
      } else {  // eof
        if (end.size() == 0) return body;
        std::string wanted;
        for (std::string_view tag : end) wanted += (wanted.empty() ? "{% " : " or {% ") + std::string(tag) + " %}";
        error("the template ended where ", wanted, " was expected");
      }
    }
  }

  // {% end %} after a tag's own arguments: its body, up to one of `end`.
  Body block(Tags end) {
    expect(Token::Kind::block_end, "%}");
    return subparse(end);
  }

  // The name of the closing tag subparse stopped at.
  std::string take_tag() { return toks_[i_++].text; }

  Stmt statement() {
    Nesting deeper(*this);
    const Token& tag = toks_[i_++];
    if (tag.text == "if") return if_stmt(tag.line);
    if (tag.text == "for") return for_stmt(tag.line);
    if (tag.text == "set") return set_stmt(tag.line);
    if (tag.text == "macro") return macro_stmt(tag.line);
    if (tag.text == "break" || tag.text == "continue") {
      if (loops_ == 0) error("{% ", tag.text, " %} outside a for loop");
      expect(Token::Kind::block_end, "%}");
      return stmt(tag.text == "break" ? Stmt::Kind::break_ : Stmt::Kind::continue_, tag.line);
    }
    if (tag.text == "generation") {
      Stmt s = stmt(Stmt::Kind::generation, tag.line);
      s.body = block({"endgeneration"});
      close_block();
      return s;
    }
    for (std::string_view inner : kInnerTags)
      if (tag.text == inner) fail_at(name_, tag.line, "unexpected {% ", tag.text, " %}");
    fail_at(name_, tag.line, "unsupported tag '", tag.text, "'");
  }

  // The closing tag subparse stopped at, and its %}.
  void close_block() {
    take_tag();
    expect(Token::Kind::block_end, "%}");
  }

  Stmt if_stmt(int line) {
    Stmt s = stmt(Stmt::Kind::if_, line);
    for (;;) {
      Branch b;
      b.condition = tuple(false);
      b.body = block({"elif", "else", "endif"});
      s.branches.push_back(std::move(b));
      std::string tag = take_tag();
      if (tag == "elif") continue;
      if (tag == "else") {
        s.else_body = block({"endif"});
        take_tag();
      }
      break;
    }
    expect(Token::Kind::block_end, "%}");
    return s;
  }

  Stmt for_stmt(int line) {
    Stmt s = stmt(Stmt::Kind::for_, line);
    s.targets = names();
    expect_name("in");
    s.expr = tuple(false);
    if (skip_name("if")) s.filter = expression();
    if (at_name("recursive")) error("unsupported: recursive for loops");
    ++loops_, ++scopes_;
    s.body = block({"endfor", "else"});
    --loops_;
    if (take_tag() == "else") {
      s.else_body = block({"endfor"});
      take_tag();
    }
    --scopes_;
    expect(Token::Kind::block_end, "%}");
    return s;
  }

  Stmt set_stmt(int line) {
    Stmt s = stmt(Stmt::Kind::set, line);
    if (cur().kind == Token::Kind::name && peek().kind == Token::Kind::op && peek().text == ".") {
      s.targets = {take_name()};
      ++i_;
      s.name = take_name();
    } else {
      s.targets = names();
    }
    if (skip_op("=")) {
      s.expr = tuple(true);
      expect(Token::Kind::block_end, "%}");
      return s;
    }
    if (at_op("|")) error("unsupported: filters on a {% set %} block");
    if (!s.name.empty() || s.targets.size() != 1) error("a {% set %} block assigns one plain name");
    s.kind = Stmt::Kind::set_block;
    s.body = block({"endset"});
    close_block();
    return s;
  }

  Stmt macro_stmt(int line) {
    // Macros see the template's top-level variables; one defined inside a
    // loop or macro would also see that scope, which this engine does not keep.
    if (scopes_ > 0) error("unsupported: a macro defined inside a for loop or macro");
    Stmt s = stmt(Stmt::Kind::macro, line);
    s.name = take_name();
    expect_op("(");
    while (!skip_op(")")) {
      if (!s.params.empty()) expect_op(",");
      std::string param = take_name();
      s.params.emplace_back(param, skip_op("=") ? expression() : nullptr);
    }
    ++scopes_;
    s.body = block({"endmacro"});
    --scopes_;
    close_block();
    return s;
  }

  // `a` or `a, b` or `(a, b)`: the targets of for and set.
  std::vector<std::string> names() {
    bool paren = skip_op("(");
    std::vector<std::string> out{take_name()};
    while (skip_op(",")) out.push_back(take_name());
    if (paren) expect_op(")");
    return out;
  }

  // ---- expressions, lowest precedence first, as jinja2's parser ----

  // Comma-separated expressions make a tuple (a list here); `condexpr`
  // allows `a if b else c` in the parts.
  ExprPtr tuple(bool condexpr, bool in_parens = false) {
    int line = cur().line;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    for (;;) {
      if (!items.empty()) expect_op(",");
      if (tuple_end()) break;
      items.push_back(condexpr ? expression() : or_expr());
      if (!at_op(",")) break;
      is_tuple = true;
    }
    if (!is_tuple && items.size() == 1) return std::move(items[0]);
    if (items.empty() && !in_parens) error("expected an expression");
    ExprPtr e = node(Expr::Kind::list, line);
    e->operands = std::move(items);
    return e;
  }

  bool tuple_end() const {
    const Token& t = cur();
    return t.kind == Token::Kind::print_end || t.kind == Token::Kind::block_end || (t.kind == Token::Kind::op && t.text == ")");
  }

  // `a if b else c` (the else optional) over or_expr.
  ExprPtr expression() {
    ExprPtr e = or_expr();
    while (at_name("if")) {
      int line = toks_[i_++].line;
      ExprPtr c = node(Expr::Kind::condition, line);
      c->operands.push_back(or_expr());
      c->operands.push_back(std::move(e));
      c->operands.push_back(skip_name("else") ? expression() : nullptr);
      e = std::move(c);
    }
    return e;
  }

  ExprPtr or_expr() {
    ExprPtr e = and_expr();
    while (at_name("or")) e = binary(std::move(e), Op::or_, &Parser::and_expr);
    return e;
  }

  ExprPtr and_expr() {
    ExprPtr e = not_expr();
    while (at_name("and")) e = binary(std::move(e), Op::and_, &Parser::not_expr);
    return e;
  }

  ExprPtr not_expr() {
    if (!at_name("not")) return compare();
    Nesting deeper(*this);
    int line = toks_[i_++].line;
    return unary(Op::not_, not_expr(), line);
  }

  ExprPtr compare() {
    static const std::pair<std::string_view, Op> kCompare[] = {
        {"==", Op::eq}, {"!=", Op::ne}, {"<", Op::lt}, {"<=", Op::le}, {">", Op::gt}, {">=", Op::ge}};
    int line = cur().line;
    ExprPtr first = math1();
    ExprPtr e = node(Expr::Kind::compare, line);
    for (;;) {
      std::optional<Op> op;
      for (const auto& [text, o] : kCompare)
        if (at_op(text)) op = o;
      if (op) ++i_;
      else if (skip_name("in")) op = Op::in;
      else if (at_name("not") && peek().kind == Token::Kind::name && peek().text == "in") i_ += 2, op = Op::not_in;
      else break;
      e->ops.push_back(*op);
      e->operands.push_back(math1());
    }
    if (e->ops.empty()) return first;
    e->operands.insert(e->operands.begin(), std::move(first));
    return e;
  }

  ExprPtr math1() {
    ExprPtr e = concat();
    for (;;) {
      if (at_op("+")) e = binary(std::move(e), Op::add, &Parser::concat);
      else if (at_op("-")) e = binary(std::move(e), Op::sub, &Parser::concat);
      else return e;
    }
  }

  ExprPtr concat() {
    ExprPtr e = math2();
    while (at_op("~")) e = binary(std::move(e), Op::concat, &Parser::math2);
    return e;
  }

  ExprPtr math2() {
    ExprPtr e = power();
    for (;;) {
      if (at_op("*")) e = binary(std::move(e), Op::mul, &Parser::power);
      else if (at_op("/")) e = binary(std::move(e), Op::div, &Parser::power);
      else if (at_op("//")) e = binary(std::move(e), Op::floordiv, &Parser::power);
      else if (at_op("%")) e = binary(std::move(e), Op::mod, &Parser::power);
      else return e;
    }
  }

  ExprPtr power() {
    ExprPtr e = filtered_unary();
    while (at_op("**")) e = binary(std::move(e), Op::pow, &Parser::filtered_unary);
    return e;
  }

  ExprPtr filtered_unary() { return unary_expr(true); }

  // `-x|abs` is abs(-x): a sign binds tighter than filters, as in jinja2.
  ExprPtr unary_expr(bool with_filters) {
    Nesting deeper(*this);
    int line = cur().line;
    ExprPtr e;
    if (skip_op("-")) e = unary(Op::neg, unary_expr(false), line);
    else if (skip_op("+")) e = unary(Op::pos, unary_expr(false), line);
    else e = primary();
    e = postfix(std::move(e));
    return with_filters ? filters(std::move(e)) : std::move(e);
  }

  ExprPtr primary() {
    const Token& t = toks_[i_++];
    switch (t.kind) {
      case Token::Kind::name:
        if (t.text == "true" || t.text == "True") return literal(true, t.line);
        if (t.text == "false" || t.text == "False") return literal(false, t.line);
        if (t.text == "none" || t.text == "None") return literal(nullptr, t.line);
        {
          ExprPtr e = node(Expr::Kind::name, t.line);
          e->name = t.text;
          return e;
        }
      case Token::Kind::string: {
        std::string s = t.text;  // adjacent literals join, as in Python
        while (cur().kind == Token::Kind::string) s += toks_[i_++].text;
        return literal(std::move(s), t.line);
      }
      case Token::Kind::integer: return literal(integer(t), t.line);
      case Token::Kind::number: return literal(number(t), t.line);
      case Token::Kind::op:
        if (t.text == "(") {
          ExprPtr e = tuple(true, true);
          expect_op(")");
          return e;
        }
        if (t.text == "[") return sequence(Expr::Kind::list, "]", t.line);
        if (t.text == "{") return sequence(Expr::Kind::dict, "}", t.line);
        break;
      default: break;
    }
    --i_;
    error("unexpected ", describe(t));
  }

  // [a, b] or {k: v, ...}, a trailing comma allowed.
  ExprPtr sequence(Expr::Kind kind, std::string_view close, int line) {
    ExprPtr e = node(kind, line);
    while (!skip_op(close)) {
      if (!e->operands.empty()) {
        expect_op(",");
        if (skip_op(close)) break;
      }
      e->operands.push_back(expression());
      if (kind == Expr::Kind::dict) {
        expect_op(":");
        e->operands.push_back(expression());
      }
    }
    return e;
  }

  ExprPtr postfix(ExprPtr e) {
    for (;;) {
      int line = cur().line;
      if (skip_op(".")) {
        const Token& t = toks_[i_++];
        if (t.kind == Token::Kind::name) {
          ExprPtr a = node(Expr::Kind::attr, line);
          a->name = t.text;
          a->operands.push_back(std::move(e));
          e = std::move(a);
        } else if (t.kind == Token::Kind::integer) {  // x.0 is x[0]
          e = item(std::move(e), literal(integer(t), t.line), line);
        } else {
          error("expected an attribute name after '.'");
        }
      } else if (skip_op("[")) {
        e = subscript(std::move(e), line);
      } else if (at_op("(")) {
        e = call(std::move(e));
      } else {
        return e;
      }
    }
  }

  // x[i] or x[start:stop:step] (each part optional).
  ExprPtr subscript(ExprPtr target, int line) {
    ExprPtr parts[3];
    if (!at_op(":")) {
      parts[0] = expression();
      if (skip_op("]")) return item(std::move(target), std::move(parts[0]), line);
      if (at_op(",")) error("unsupported: a subscript with several keys");
    }
    for (int k = 1; k < 3; ++k) {
      if (!skip_op(":")) break;
      if (!at_op(":") && !at_op("]")) parts[k] = expression();
    }
    expect_op("]");
    ExprPtr e = node(Expr::Kind::slice, line);
    e->operands.push_back(std::move(target));
    for (ExprPtr& p : parts) e->operands.push_back(std::move(p));
    return e;
  }

  ExprPtr item(ExprPtr target, ExprPtr key, int line) {
    ExprPtr e = node(Expr::Kind::item, line);
    e->operands.push_back(std::move(target));
    e->operands.push_back(std::move(key));
    return e;
  }

  ExprPtr call(ExprPtr callee) {
    ExprPtr e = node(Expr::Kind::call, cur().line);
    e->operands.push_back(std::move(callee));
    arguments(*e);
    return e;
  }

  // (a, b, key=c): positional arguments into operands after the first.
  void arguments(Expr& e) {
    expect_op("(");
    bool first = true;
    while (!skip_op(")")) {
      if (!first) {
        expect_op(",");
        if (skip_op(")")) break;  // a trailing comma
      }
      first = false;
      if (at_op("*") || at_op("**")) error("unsupported: *args and **kwargs in a call");
      if (cur().kind == Token::Kind::name && peek().kind == Token::Kind::op && peek().text == "=") {
        std::string key = take_name();
        ++i_;
        e.keywords.emplace_back(std::move(key), expression());
      } else {
        if (!e.keywords.empty()) error("a positional argument after a keyword argument");
        e.operands.push_back(expression());
      }
    }
  }

  // `| filter(...)`, `is [not] test ...` and calls, left to right.
  ExprPtr filters(ExprPtr e) {
    for (;;) {
      int line = cur().line;
      if (skip_op("|")) {
        ExprPtr f = node(Expr::Kind::filter, line);
        f->name = take_name();
        if (!is_filter(f->name)) fail_at(name_, line, "unsupported filter '", f->name, "'");
        f->operands.push_back(std::move(e));
        if (at_op("(")) arguments(*f);
        e = std::move(f);
      } else if (skip_name("is")) {
        ExprPtr t = node(Expr::Kind::test, line);
        t->negated = skip_name("not");
        t->name = take_name();
        if (!is_test(t->name)) fail_at(name_, line, "unsupported test '", t->name, "'");
        t->operands.push_back(std::move(e));
        if (at_op("(")) arguments(*t);
        else if (test_argument_follows()) t->operands.push_back(postfix(primary()));
        e = std::move(t);
      } else if (at_op("(")) {
        e = call(std::move(e));
      } else {
        return e;
      }
    }
  }

  // `x is divisibleby 3`: a test's one argument may follow without parentheses.
  bool test_argument_follows() const {
    const Token& t = cur();
    switch (t.kind) {
      case Token::Kind::name: return t.text != "else" && t.text != "or" && t.text != "and" && t.text != "is";
      case Token::Kind::string:
      case Token::Kind::integer:
      case Token::Kind::number: return true;
      case Token::Kind::op: return t.text == "[" || t.text == "{";
      default: return false;
    }
  }

  ExprPtr binary(ExprPtr left, Op op, ExprPtr (Parser::*next)()) {
    int line = toks_[i_++].line;
    ExprPtr e = node(Expr::Kind::binary, line);
    e->ops.push_back(op);
    e->operands.push_back(std::move(left));
    e->operands.push_back((this->*next)());
    return e;
  }

  ExprPtr unary(Op op, ExprPtr operand, int line) {
    ExprPtr e = node(Expr::Kind::unary, line);
    e->ops.push_back(op);
    e->operands.push_back(std::move(operand));
    return e;
  }

  Json integer(const Token& t) {
    std::string digits;
    for (char c : t.text)
      if (c != '_') digits += c;
    int base = 10;
    if (digits.size() > 1 && digits[0] == '0' && std::isalpha(static_cast<unsigned char>(digits[1]))) {
      char b = char(std::tolower(static_cast<unsigned char>(digits[1])));
      base = b == 'x' ? 16 : b == 'o' ? 8 : 2;
      digits.erase(0, 2);
    } else if (digits.size() > 1 && digits[0] == '0') {
      fail_at(name_, t.line, "invalid integer literal '", t.text, "' (leading zeros)");
    }
    int64_t v = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v, base);
    if (ec != std::errc() || end != digits.data() + digits.size())
      fail_at(name_, t.line, "invalid or too large integer literal '", t.text, "'");
    return v;
  }

  Json number(const Token& t) {
    std::string digits;
    for (char c : t.text)
      if (c != '_') digits += c;
    double v = 0;
    std::from_chars(digits.data(), digits.data() + digits.size(), v);
    return v;
  }

  // ---- tokens ----

  const Token& cur() const { return toks_[std::min(i_, toks_.size() - 1)]; }  // eof repeats
  const Token& peek() const { return toks_[std::min(i_ + 1, toks_.size() - 1)]; }
  bool at_op(std::string_view o) const { return cur().kind == Token::Kind::op && cur().text == o; }
  bool at_name(std::string_view n) const { return cur().kind == Token::Kind::name && cur().text == n; }
  bool skip_op(std::string_view o) { return at_op(o) ? (++i_, true) : false; }
  bool skip_name(std::string_view n) { return at_name(n) ? (++i_, true) : false; }
  void expect_op(std::string_view o) {
    if (!skip_op(o)) error("expected '", o, "', found ", describe(cur()));
  }
  void expect_name(std::string_view n) {
    if (!skip_name(n)) error("expected '", n, "', found ", describe(cur()));
  }
  void expect(Token::Kind kind, std::string_view what) {
    if (cur().kind != kind) error("expected ", what, ", found ", describe(cur()));
    ++i_;
  }
  std::string take_name() {
    if (cur().kind != Token::Kind::name) error("expected a name, found ", describe(cur()));
    return toks_[i_++].text;
  }

  static std::string describe(const Token& t) {
    switch (t.kind) {
      case Token::Kind::print_end: return "'}}'";
      case Token::Kind::block_end: return "'%}'";
      case Token::Kind::eof: return "the end of the template";
      case Token::Kind::string: return "a string";
      default: return "'" + t.text + "'";
    }
  }

  Stmt stmt(Stmt::Kind kind, int line) {
    Stmt s;
    s.kind = kind;
    s.line = line;
    return s;
  }

  template <class... Args>
  [[noreturn]] void error(const Args&... parts) const {
    fail_at(name_, cur().line, parts...);
  }

  // Nesting deeper than this (brackets, signs, `not`, blocks) is refused
  // rather than risking the stack, in the parser and in the interpreter.
  static constexpr int kMaxNesting = 100;
  struct Nesting {
    Parser& p;
    explicit Nesting(Parser& parser) : p(parser) {
      if (++p.nesting_ > kMaxNesting) p.error("unsupported: nesting deeper than ", kMaxNesting, " levels");
    }
    ~Nesting() { --p.nesting_; }
  };

  std::vector<Token> toks_;
  const std::string& name_;
  size_t i_ = 0;
  int nesting_ = 0;
  int loops_ = 0;   // for loops around the current point: break and continue need one
  int scopes_ = 0;  // for loops and macros around it: macros are defined outside both
};

}  // namespace

Program parse(std::string_view source, std::string name) {
  Program p;
  p.name = std::move(name);
  p.body = Parser(lex(source, p.name), p.name).run();
  return p;
}

}  // namespace kiln::data::jinja
