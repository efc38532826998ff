#include "kiln/data/jinja_ops.h"

#include <cmath>
#include <limits>

#include "kiln/data/jinja_error.h"
#include "kiln/data/jinja_strings.h"

namespace kiln::data::jinja {

namespace {

const char* symbol(Op op) {
  switch (op) {
    case Op::add: return "+";
    case Op::sub: return "-";
    case Op::mul: return "*";
    case Op::div: return "/";
    case Op::floordiv: return "//";
    case Op::mod: return "%";
    case Op::pow: return "**";
    case Op::lt: return "<";
    case Op::le: return "<=";
    case Op::gt: return ">";
    case Op::ge: return ">=";
    default: return "?";
  }
}

void check_defined(const Value& v) {
  if (auto* u = v.as<Undefined>()) failure(u->why);
}

// How jinja2 names a value in "... has no attribute 'x'".
std::string described(const Value& v) {
  const Json* j = v.data();
  return j && j->is_null() ? "'None'" : cat("'", type_name(v), " object'");
}

bool json_equal(const Json& a, const Json& b) {
  bool a_num = a.is_number() || a.is_boolean(), b_num = b.is_number() || b.is_boolean();
  if (a_num || b_num) {
    if (!a_num || !b_num) return false;
    auto x = json_number(a), y = json_number(b);
    return x->is_float || y->is_float ? x->as_double() == y->as_double() : x->i == y->i;
  }
  if (a.type() != b.type()) return false;
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t k = 0; k < a.size(); ++k)
      if (!json_equal(a[k], b[k])) return false;
    return true;
  }
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (auto it = a.begin(); it != a.end(); ++it) {
      auto other = b.find(it.key());
      if (other == b.end() || !json_equal(*it, *other)) return false;
    }
    return true;
  }
  return a == b;
}

[[noreturn]] void overflow() { failure("integer overflow (Python's integers are unbounded, kiln's are 64-bit)"); }
int64_t add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) overflow();
  return r;
}
int64_t sub(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) overflow();
  return r;
}
int64_t mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) overflow();
  return r;
}

Value integer_op(Op op, int64_t x, int64_t y) {
  switch (op) {
    case Op::add: return Json(add(x, y));
    case Op::sub: return Json(sub(x, y));
    case Op::mul: return Json(mul(x, y));
    case Op::div:
      if (y == 0) failure("division by zero");
      return Json(double(x) / double(y));
    case Op::floordiv:
    case Op::mod: {
      if (y == 0) failure("integer division or modulo by zero");
      if (y == -1) return op == Op::mod ? Json(0) : Json(sub(0, x));
      int64_t q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) --q, m += y;  // Python rounds toward -infinity
      return Json(op == Op::mod ? m : q);
    }
    case Op::pow: {
      if (y < 0) return Json(std::pow(double(x), double(y)));
      int64_t p = 1, base = x;  // by squaring; base is squared only when a higher bit needs it
      for (int64_t e = y; e > 0; e >>= 1) {
        if (e & 1) p = mul(p, base);
        if (e > 1) base = mul(base, base);
      }
      return Json(p);
    }
    default: failure("bad integer operator");
  }
}

Value float_op(Op op, double x, double y) {
  switch (op) {
    case Op::add: return Json(x + y);
    case Op::sub: return Json(x - y);
    case Op::mul: return Json(x * y);
    case Op::div:
      if (y == 0) failure("float division by zero");
      return Json(x / y);
    case Op::floordiv:
    case Op::mod: {  // CPython's float_divmod
      if (y == 0) failure("float divmod by zero");
      double mod = std::fmod(x, y), div = (x - mod) / y;
      if (mod != 0) {
        if ((y < 0) != (mod < 0)) mod += y, div -= 1.0;
      } else {
        mod = std::copysign(0.0, y);
      }
      double floordiv = std::copysign(0.0, x / y);
      if (div != 0) {
        floordiv = std::floor(div);
        if (div - floordiv > 0.5) floordiv += 1.0;
      }
      return Json(op == Op::mod ? mod : floordiv);
    }
    case Op::pow:
      if (x == 0 && y < 0) failure("0.0 cannot be raised to a negative power");
      if (x < 0 && y != std::floor(y)) failure("a negative number to a fractional power is complex");
      return Json(std::pow(x, y));
    default: failure("bad float operator");
  }
}

// A bound like the interpreter's on rendered text: no chat template builds
// a string or list this long, and doubling one in a loop must fail, not
// exhaust memory.
constexpr int64_t kMaxLength = int64_t(64) << 20;

int64_t length_of(const Json& seq) {
  return int64_t(seq.is_string() ? seq.get_ref<const std::string&>().size() : seq.size());
}

void check_length(int64_t n) {
  if (n > kMaxLength) failure("a string or list of ", n, " bytes or items: more than ", kMaxLength);
}

Json repeat(const Json& seq, int64_t times) {
  const int64_t size = length_of(seq);
  if (times > 0 && size > 0) check_length(times > kMaxLength / size ? kMaxLength + 1 : times * size);
  Json out = seq.is_string() ? Json("") : Json::array();
  for (int64_t k = 0; k < times; ++k) {
    if (seq.is_string()) out.get_ref<std::string&>() += seq.get_ref<const std::string&>();
    else out.insert(out.end(), seq.begin(), seq.end());
  }
  return out;
}

Value arithmetic(Op op, const Value& a, const Value& b) {
  check_defined(a);
  check_defined(b);
  auto x = number_of(a), y = number_of(b);
  if (x && y) return x->is_float || y->is_float ? float_op(op, x->as_double(), y->as_double()) : integer_op(op, x->i, y->i);
  const Json *ja = a.data(), *jb = b.data();
  if (ja && jb && op == Op::add && ja->type() == jb->type() && (ja->is_string() || ja->is_array())) {
    check_length(length_of(*ja) + length_of(*jb));
    if (ja->is_string()) return Json(ja->get<std::string>() + jb->get_ref<const std::string&>());
    Json out = *ja;
    out.insert(out.end(), jb->begin(), jb->end());
    return out;
  }
  if (ja && jb && op == Op::mul) {
    if ((ja->is_string() || ja->is_array()) && y && !y->is_float) return repeat(*ja, y->i);
    if ((jb->is_string() || jb->is_array()) && x && !x->is_float) return repeat(*jb, x->i);
  }
  if (ja && ja->is_string() && op == Op::mod) failure("unsupported: '%' string formatting");
  failure("unsupported operand type(s) for ", symbol(op), ": '", type_name(a), "' and '", type_name(b), "'");
}

// -1, 0 or 1 as Python orders a and b; fails for types Python cannot order.
int order(const Value& a, const Value& b, Op op) {
  check_defined(a);
  check_defined(b);
  auto x = number_of(a), y = number_of(b);
  if (x && y) {
    if (!x->is_float && !y->is_float) return x->i < y->i ? -1 : x->i > y->i;
    return x->as_double() < y->as_double() ? -1 : x->as_double() > y->as_double();
  }
  const Json *ja = a.data(), *jb = b.data();
  if (ja && jb && ja->is_string() && jb->is_string()) {
    int c = ja->get_ref<const std::string&>().compare(jb->get_ref<const std::string&>());  // UTF-8 bytes sort as code points
    return c < 0 ? -1 : c > 0;
  }
  if (ja && jb && ja->is_array() && jb->is_array()) {  // the first unequal items decide, else the length
    for (size_t k = 0; k < ja->size() && k < jb->size(); ++k)
      if (!json_equal((*ja)[k], (*jb)[k])) return order(a.child((*ja)[k]), b.child((*jb)[k]), op);
    return ja->size() < jb->size() ? -1 : ja->size() > jb->size();
  }
  failure("'", symbol(op), "' not supported between instances of '", type_name(a), "' and '", type_name(b), "'");
}

// Python's `needle in haystack`.
bool contains(const Value& haystack, const Value& needle) {
  if (haystack.undefined()) return false;  // Undefined iterates as empty
  const Json* h = haystack.data();
  const Json* n = needle.data();
  if (h && h->is_string()) {
    if (!n || !n->is_string())
      failure("'in <string>' requires string as left operand, not ", type_name(needle));
    return h->get_ref<const std::string&>().find(n->get_ref<const std::string&>()) != std::string::npos;
  }
  if (h && h->is_array()) {
    for (const Json& item : *h)
      if (equal(haystack.child(item), needle)) return true;
    return false;
  }
  if (h && h->is_object()) return n && n->is_string() && h->contains(n->get_ref<const std::string&>());
  failure("argument of type '", type_name(haystack), "' is not iterable");
}

// The integer value of an index, or nothing for a non-integer.
std::optional<int64_t> index_of(const Value& v) {
  auto n = number_of(v);
  if (!n || n->is_float) return std::nullopt;
  return n->i;
}

Value loop_attr(const Loop& loop, const std::string& name) {
  int64_t i = int64_t(loop.index0), n = int64_t(loop.length);
  if (name == "index0") return Json(i);
  if (name == "index") return Json(i + 1);
  if (name == "revindex0") return Json(n - i - 1);
  if (name == "revindex") return Json(n - i);
  if (name == "first") return Json(i == 0);
  if (name == "last") return Json(i == n - 1);
  if (name == "length") return Json(n);
  failure("unsupported loop attribute 'loop.", name, "'");
}

}  // namespace

std::optional<Number> number_of(const Value& v) {
  const Json* j = v.data();
  return j ? json_number(*j) : std::nullopt;
}

std::optional<Number> json_number(const Json& j) {
  if (j.is_boolean()) return Number{false, j.get<bool>() ? 1 : 0, 0};
  if (j.is_number_unsigned()) {
    uint64_t u = j.get<uint64_t>();
    if (u > uint64_t(std::numeric_limits<int64_t>::max())) return Number{true, 0, double(u)};  // past int64: a float
    return Number{false, int64_t(u), 0};
  }
  if (j.is_number_integer()) return Number{false, j.get<int64_t>(), 0};
  if (j.is_number_float()) return Number{true, 0, j.get<double>()};
  return std::nullopt;
}

bool equal(const Value& a, const Value& b) {
  if (a.undefined() || b.undefined()) return a.undefined() && b.undefined();
  const Json *x = a.data(), *y = b.data();
  if (x && y) return json_equal(*x, *y);
  if (x || y) return false;
  if (auto* ns = a.as<std::shared_ptr<Namespace>>()) return b.as<std::shared_ptr<Namespace>>() && *ns == *b.as<std::shared_ptr<Namespace>>();
  if (auto* f = a.as<Function>()) return b.as<Function>() && f->name == b.as<Function>()->name;
  if (auto* m = a.as<Macro>()) return b.as<Macro>() && m->def == b.as<Macro>()->def;
  return false;  // loop objects: each iteration's is its own
}

Value binary_op(Op op, const Value& a, const Value& b) {
  switch (op) {
    case Op::concat: {
      std::string joined = to_str(a);
      const std::string right = to_str(b);
      check_length(int64_t(joined.size() + right.size()));
      return Json(joined + right);
    }
    case Op::eq: return Json(equal(a, b));
    case Op::ne: return Json(!equal(a, b));
    case Op::in: return Json(contains(b, a));
    case Op::not_in: return Json(!contains(b, a));
    case Op::lt: return Json(order(a, b, op) < 0);
    case Op::le: return Json(order(a, b, op) <= 0);
    case Op::gt: return Json(order(a, b, op) > 0);
    case Op::ge: return Json(order(a, b, op) >= 0);
    default: return arithmetic(op, a, b);
  }
}

Value unary_op(Op op, const Value& a) {
  check_defined(a);
  auto x = number_of(a);
  if (!x) failure("bad operand type for unary ", op == Op::neg ? "-" : "+", ": '", type_name(a), "'");
  if (op == Op::pos) return x->is_float ? Json(x->f) : Json(x->i);
  return x->is_float ? Json(-x->f) : Json(sub(0, x->i));
}

Value get_attr(const Value& obj, const std::string& name) {
  check_defined(obj);
  if (const Json* j = obj.data()) {
    if (j->is_object()) {
      auto it = j->find(name);
      if (it != j->end()) return obj.child(*it);
    }
  } else if (auto* ns = obj.as<std::shared_ptr<Namespace>>()) {
    if (Value* v = (*ns)->find(name)) return *v;
  } else if (auto* loop = obj.as<Loop>()) {
    return loop_attr(*loop, name);
  }
  return Undefined{described(obj) + " has no attribute '" + name + "'"};
}

Value get_item(const Value& obj, const Value& key) {
  check_defined(obj);
  const Json* j = obj.data();
  const Json* k = key.data();
  if (k && k->is_string() && !(j && j->is_string())) return get_attr(obj, k->get<std::string>());
  std::optional<int64_t> index = index_of(key);
  if (j && index && (j->is_array() || j->is_string())) {
    std::vector<std::string> chars;
    if (j->is_string()) chars = code_points(j->get_ref<const std::string&>());
    int64_t n = j->is_array() ? int64_t(j->size()) : int64_t(chars.size());
    int64_t at = *index < 0 ? *index + n : *index;
    if (at >= 0 && at < n) return j->is_array() ? obj.child((*j)[size_t(at)]) : Value(Json(chars[size_t(at)]));
  }
  return Undefined{described(obj) + " has no element " + repr(key)};
}

Value get_slice(const Value& obj, const Value* start, const Value* stop, const Value* step) {
  check_defined(obj);
  const Json* j = obj.data();
  auto bound = [](const Value* v, bool& ok) -> std::optional<int64_t> {
    if (!v || (v->data() && v->data()->is_null())) return std::nullopt;
    auto i = index_of(*v);
    ok = ok && i.has_value();
    return i;
  };
  bool ok = true;
  auto first = bound(start, ok), last = bound(stop, ok), by = bound(step, ok);
  // Python's TypeError for non-integer bounds, which jinja2 turns into Undefined.
  if (!ok || !j || !(j->is_array() || j->is_string())) return Undefined{described(obj) + " cannot be sliced that way"};
  int64_t s = by.value_or(1);
  if (s == 0) failure("slice step cannot be zero");
  std::vector<std::string> chars;
  if (j->is_string()) chars = code_points(j->get_ref<const std::string&>());
  int64_t n = j->is_array() ? int64_t(j->size()) : int64_t(chars.size());
  auto clamp = [&](std::optional<int64_t> v, int64_t if_absent) {  // CPython's PySlice_AdjustIndices
    if (!v) return if_absent;
    int64_t x = *v < 0 ? *v + n : *v;
    if (x < 0) return s < 0 ? int64_t(-1) : int64_t(0);
    if (x >= n) return s < 0 ? n - 1 : n;
    return x;
  };
  int64_t from = clamp(first, s < 0 ? n - 1 : 0), to = clamp(last, s < 0 ? -1 : n);
  Json out = j->is_array() ? Json::array() : Json("");
  for (int64_t k = from; s > 0 ? k < to : k > to; k += s) {
    if (j->is_array()) out.push_back((*j)[size_t(k)]);
    else out.get_ref<std::string&>() += chars[size_t(k)];
  }
  return out;
}

}  // namespace kiln::data::jinja
