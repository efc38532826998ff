// A parsed template: the expression and statement nodes of jinja2's parser
// that this engine runs. Built once by jinja_parser, read by jinja_eval.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/data/jinja_format.h"

namespace kiln::data::jinja {

enum class Op : uint8_t {
  add, sub, mul, div, floordiv, mod, pow, concat,  // + - * / // % ** ~
  eq, ne, lt, le, gt, ge, in, not_in,              // comparisons
  and_, or_, not_, neg, pos,                       // logic and signs
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;
using Keywords = std::vector<std::pair<std::string, ExprPtr>>;

struct Expr {
  enum class Kind : uint8_t {
    literal,    // value
    list,       // [operands...]; tuples are lists too
    dict,       // {operands[0]: operands[1], operands[2]: operands[3], ...}
    name,       // name
    attr,       // operands[0].name
    item,       // operands[0][operands[1]]
    slice,      // operands[0][operands[1]:operands[2]:operands[3]], an absent bound null
    call,       // operands[0](operands[1...], keywords)
    filter,     // operands[0] | name(operands[1...], keywords)
    test,       // operands[0] is [not] name(operands[1...], keywords)
    unary,      // ops[0] operands[0]
    binary,     // operands[0] ops[0] operands[1]
    compare,    // operands[0] ops[0] operands[1] ops[1] operands[2] ... (a < b < c)
    condition,  // operands[1] if operands[0] else operands[2] (no else: undefined)
  };
  Kind kind;
  int line;
  std::string name;
  Json value;
  std::vector<ExprPtr> operands;
  Keywords keywords;
  std::vector<Op> ops;
  bool negated = false;  // `is not`
};

struct Stmt;
using Body = std::vector<Stmt>;

struct Branch {
  ExprPtr condition;
  Body body;
};

struct Stmt {
  enum class Kind : uint8_t {
    text,        // text
    output,      // {{ expr }}
    if_,         // branches (if, elif...), else_body
    for_,        // for targets in expr [if filter]: body, else_body when nothing iterated
    set,         // set targets = expr, or set targets[0].name = expr (a namespace)
    set_block,   // set targets[0]: the rendered body
    macro,       // macro name(params): body
    break_,
    continue_,
    generation,  // transformers' {% generation %}: its body, rendered as is
  };
  Kind kind;
  int line;
  std::string text;
  std::string name;
  ExprPtr expr;
  ExprPtr filter;
  std::vector<std::string> targets;
  std::vector<Branch> branches;
  Body body, else_body;
  Keywords params;  // a macro's parameters and defaults (null: none)
};

struct Program {
  std::string name;  // for messages: "chat template line 3: ..."
  Body body;
};

}  // namespace kiln::data::jinja
