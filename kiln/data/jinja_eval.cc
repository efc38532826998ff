#include "kiln/data/jinja_eval.h"

#include <algorithm>

#include "kiln/data/jinja_builtins.h"
#include "kiln/data/jinja_error.h"
#include "kiln/data/jinja_ops.h"

namespace kiln::data::jinja {

namespace {

// The variables one scope sets: the template's top level, one iteration of
// a for loop, or one macro call. Lookups continue in the parent.
struct Scope {
  const Scope* parent = nullptr;
  std::vector<std::pair<std::string, Value>> vars;

  const Value* find(const std::string& name) const {
    for (const auto& [key, value] : vars)
      if (key == name) return &value;
    return nullptr;
  }
  void set(const std::string& name, Value v) {
    auto it = std::find_if(vars.begin(), vars.end(), [&](auto& kv) { return kv.first == name; });
    if (it != vars.end()) it->second = std::move(v);
    else vars.emplace_back(name, std::move(v));
  }
};

// What a statement asks of the loop around it.
enum class Flow { next, break_, continue_ };

// Deeper macro calls fail rather than overflow the stack (jinja2 stops at
// Python's recursion limit).
constexpr int kMaxMacroDepth = 100;
// A chat template runs a few thousand statements and loop iterations and
// renders kilobytes:
// far past these it is runaway loops (nested range()s), which fail rather
// than hang or exhaust memory.
constexpr int64_t kMaxSteps = 10'000'000;
constexpr size_t kMaxOutputBytes = size_t(64) << 20;

class Interpreter {
 public:
  Interpreter(const Program& program, Json context)
      : program_(program), context_(std::move(context)) {}

  std::string run() {
    std::string out;
    exec(program_.body, top_, out);
    return out;
  }

 private:
  Flow exec(const Body& body, Scope& scope, std::string& out) {
    for (const Stmt& s : body) {
      Flow f = exec(s, scope, out);
      if (f != Flow::next) return f;
    }
    return Flow::next;
  }

  Flow exec(const Stmt& s, Scope& scope, std::string& out) {
    try {
      return run_stmt(s, scope, out);
    } catch (const Failure& e) {
      fail_at(program_.name, s.line, e.what());
    }
  }

  void count_step() {
    if (++steps_ > kMaxSteps)
      failure("the template ran more than ", kMaxSteps, " statements and loop iterations (a runaway loop?)");
  }

  Flow run_stmt(const Stmt& s, Scope& scope, std::string& out) {
    count_step();
    switch (s.kind) {
      case Stmt::Kind::text: return emit(s.text, out);
      case Stmt::Kind::output: return emit(to_str(eval(*s.expr, scope)), out);
      case Stmt::Kind::if_:
        for (const Branch& b : s.branches)
          if (truthy(eval(*b.condition, scope))) return exec(b.body, scope, out);
        return exec(s.else_body, scope, out);
      case Stmt::Kind::for_: for_loop(s, scope, out); return Flow::next;
      case Stmt::Kind::set:
        if (s.name.empty()) assign(s.targets, eval(*s.expr, scope), scope);
        else set_attribute(s, scope);
        return Flow::next;
      case Stmt::Kind::set_block: {
        std::string text;
        exec(s.body, scope, text);
        scope.set(s.targets[0], Json(std::move(text)));
        return Flow::next;
      }
      case Stmt::Kind::macro: scope.set(s.name, Macro{&s}); return Flow::next;
      case Stmt::Kind::break_: return Flow::break_;
      case Stmt::Kind::continue_: return Flow::continue_;
      case Stmt::Kind::generation: return exec(s.body, scope, out);
    }
    return Flow::next;
  }

  Flow emit(const std::string& text, std::string& out) {
    if (out.size() + text.size() > kMaxOutputBytes)
      failure("the rendered text exceeds ", kMaxOutputBytes >> 20, " MiB");
    out += text;
    return Flow::next;
  }

  void for_loop(const Stmt& s, Scope& scope, std::string& out) {
    std::vector<Value> items = iterate(eval(*s.expr, scope));
    if (s.filter) {  // `for x in xs if cond`: loop.index counts the kept items only
      std::vector<Value> kept;
      for (Value& item : items) {
        Scope probe{&scope, {}};
        assign(s.targets, item, probe);
        if (truthy(eval(*s.filter, probe))) kept.push_back(std::move(item));
      }
      items = std::move(kept);
    }
    for (size_t i = 0; i < items.size(); ++i) {
      count_step();
      Scope iteration{&scope, {}};
      assign(s.targets, items[i], iteration);
      iteration.set("loop", Loop{i, items.size()});
      if (exec(s.body, iteration, out) == Flow::break_) break;
    }
    if (items.empty()) {
      Scope otherwise{&scope, {}};
      exec(s.else_body, otherwise, out);
    }
  }

  // `set a = v` or `for a, b in ...`: several names unpack a sequence.
  void assign(const std::vector<std::string>& targets, const Value& v, Scope& scope) {
    if (targets.size() == 1) return scope.set(targets[0], v);
    std::vector<Value> parts = iterate(v);
    if (parts.size() != targets.size())
      failure("cannot unpack ", parts.size(), " values into ", targets.size(), " names");
    for (size_t k = 0; k < parts.size(); ++k) scope.set(targets[k], std::move(parts[k]));
  }

  // `set ns.attr = v`: the namespace changes for everyone who holds it.
  void set_attribute(const Stmt& s, Scope& scope) {
    Value target = lookup(s.targets[0], scope);
    auto* ns = target.as<std::shared_ptr<Namespace>>();
    if (!ns) failure("cannot set attribute '", s.name, "' of '", s.targets[0], "': it is a ", type_name(target),
                     ", not a namespace()");
    Value v = eval(*s.expr, scope);
    if (Value* slot = (*ns)->find(s.name)) *slot = std::move(v);
    else (*ns)->attrs.emplace_back(s.name, std::move(v));
  }

  Value lookup(const std::string& name, const Scope& scope) const {
    for (const Scope* s = &scope; s; s = s->parent)
      if (const Value* v = s->find(name)) return *v;
    if (const Json* all = context_.data()) {
      auto it = all->find(name);
      if (it != all->end()) return context_.child(*it);
    }
    if (is_global(name)) return Function{name};
    return Undefined{"'" + name + "' is undefined"};
  }

  Value eval(const Expr& e, Scope& scope) {
    try {
      return evaluate(e, scope);
    } catch (const Failure& f) {
      fail_at(program_.name, e.line, f.what());
    }
  }

  Value evaluate(const Expr& e, Scope& scope) {
    switch (e.kind) {
      case Expr::Kind::literal: return Value(e.value);
      case Expr::Kind::list: {
        Json out = Json::array();
        for (const ExprPtr& item : e.operands) out.push_back(to_json(eval(*item, scope)));
        return out;
      }
      case Expr::Kind::dict: {
        Json out = Json::object();
        for (size_t k = 0; k < e.operands.size(); k += 2) {
          Value key = eval(*e.operands[k], scope);
          if (!key.data() || !key.data()->is_string())
            failure("dict keys must be strings here, not ", type_name(key));
          out[key.data()->get<std::string>()] = to_json(eval(*e.operands[k + 1], scope));
        }
        return out;
      }
      case Expr::Kind::name: return lookup(e.name, scope);
      case Expr::Kind::attr: return get_attr(eval(*e.operands[0], scope), e.name);
      case Expr::Kind::item: return get_item(eval(*e.operands[0], scope), eval(*e.operands[1], scope));
      case Expr::Kind::slice: {
        Value target = eval(*e.operands[0], scope);
        Value bounds[3];
        for (int k = 0; k < 3; ++k)
          if (e.operands[size_t(k) + 1]) bounds[k] = eval(*e.operands[size_t(k) + 1], scope);
        auto bound = [&](int k) { return e.operands[size_t(k) + 1] ? &bounds[k] : nullptr; };
        return get_slice(target, bound(0), bound(1), bound(2));
      }
      case Expr::Kind::call: return call(e, scope);
      case Expr::Kind::filter: {
        Value input = eval(*e.operands[0], scope);
        return apply_filter(e.name, input, arguments(e, scope));
      }
      case Expr::Kind::test: {
        Value input = eval(*e.operands[0], scope);
        return Json(apply_test(e.name, input, arguments(e, scope)) != e.negated);
      }
      case Expr::Kind::unary: {
        Value v = eval(*e.operands[0], scope);
        return e.ops[0] == Op::not_ ? Value(Json(!truthy(v))) : unary_op(e.ops[0], v);
      }
      case Expr::Kind::binary: {
        Value left = eval(*e.operands[0], scope);
        // `and` / `or` give an operand, not a bool, and skip the right one when they can.
        if (e.ops[0] == Op::and_) return truthy(left) ? eval(*e.operands[1], scope) : left;
        if (e.ops[0] == Op::or_) return truthy(left) ? left : eval(*e.operands[1], scope);
        return binary_op(e.ops[0], left, eval(*e.operands[1], scope));
      }
      case Expr::Kind::compare: {
        Value left = eval(*e.operands[0], scope);
        for (size_t k = 0; k < e.ops.size(); ++k) {
          Value right = eval(*e.operands[k + 1], scope);
          if (!truthy(binary_op(e.ops[k], left, right))) return Json(false);
          left = std::move(right);
        }
        return Json(true);
      }
      case Expr::Kind::condition:
        if (truthy(eval(*e.operands[0], scope))) return eval(*e.operands[1], scope);
        if (e.operands[2]) return eval(*e.operands[2], scope);
        return Undefined{"the inline if-expression evaluated to false and has no else"};
    }
    failure("unknown expression");
  }

  CallArgs arguments(const Expr& e, Scope& scope) {
    CallArgs args;
    for (size_t k = 1; k < e.operands.size(); ++k) args.positional.push_back(eval(*e.operands[k], scope));
    for (const auto& [name, value] : e.keywords) args.keywords.emplace_back(name, eval(*value, scope));
    return args;
  }

  // f(...), obj.method(...), or a macro or function stored in a namespace.
  Value call(const Expr& e, Scope& scope) {
    const Expr& callee = *e.operands[0];
    if (callee.kind == Expr::Kind::attr) {
      Value self = eval(*callee.operands[0], scope);
      if (!self.as<std::shared_ptr<Namespace>>()) return call_method(self, callee.name, arguments(e, scope));
      return call_value(get_attr(self, callee.name), arguments(e, scope));
    }
    Value f = eval(callee, scope);
    return call_value(f, arguments(e, scope));
  }

  Value call_value(const Value& f, const CallArgs& args) {
    if (auto* g = f.as<Function>()) return call_global(g->name, args);
    if (auto* m = f.as<Macro>()) return call_macro(*m->def, args);
    if (auto* u = f.as<Undefined>()) failure(u->why);
    failure("'", type_name(f), "' object is not callable");
  }

  Value call_macro(const Stmt& def, const CallArgs& args) {
    if (macro_depth_ >= kMaxMacroDepth) failure("macro calls nested more than ", kMaxMacroDepth, " deep");
    if (args.positional.size() > def.params.size())
      failure("macro '", def.name, "' takes ", def.params.size(), " argument(s), got ", args.positional.size());
    Scope frame{&top_, {}};
    std::vector<bool> given(def.params.size(), false);
    for (size_t k = 0; k < args.positional.size(); ++k) {
      frame.set(def.params[k].first, args.positional[k]);
      given[k] = true;
    }
    for (const auto& [name, value] : args.keywords) {
      auto it = std::find_if(def.params.begin(), def.params.end(), [&](auto& p) { return p.first == name; });
      if (it == def.params.end()) failure("macro '", def.name, "' has no parameter '", name, "'");
      frame.set(name, value);
      given[size_t(it - def.params.begin())] = true;
    }
    for (size_t k = 0; k < def.params.size(); ++k) {
      if (given[k]) continue;
      const auto& [name, fallback] = def.params[k];
      frame.set(name, fallback ? eval(*fallback, frame) : Value(Undefined{"parameter '" + name + "' was not provided"}));
    }
    struct Nesting {
      int& depth;
      ~Nesting() { --depth; }
    } nesting{++macro_depth_};
    std::string out;
    exec(def.body, frame, out);
    return Json(std::move(out));
  }

  const Program& program_;
  Value context_;
  Scope top_;
  int macro_depth_ = 0;
  int64_t steps_ = 0;  // statements and loop iterations run
};

}  // namespace

std::string render(const Program& program, Json context) {
  return Interpreter(program, std::move(context)).run();
}

}  // namespace kiln::data::jinja
