// Elementwise kernels: one functor per op over the strided map engine.
// 16-bit floats compute in f32; integer ops compute in their own type.
#include <cmath>
#include <numbers>

#include "kiln/backend/cpu/loops.h"
#include "kiln/base/error.h"
#include "kiln/runtime/backend.h"

namespace kiln::cpu {
namespace {

// Calls f(T{}) for the dtypes an op family supports; others are an error.
template <class F>
void visit_floating(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::f32: return f(float{});
    case DType::bf16: return f(bf16{});
    case DType::f16: return f(f16{});
    case DType::f64: return f(double{});
    default: fail("op '", op, "' has no CPU kernel for dtype ", dtype_name(t));
  }
}

template <class F>
void visit_numeric(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::i32: return f(int32_t{});
    case DType::i64: return f(int64_t{});
    default: return visit_floating(t, op, f);
  }
}

// Unary functors; T is the compute type (float, double or an integer).
struct Neg { template <class T> T operator()(T x) const { return -x; } };
struct Abs { template <class T> T operator()(T x) const { return x < 0 ? -x : x; } };
struct Square { template <class T> T operator()(T x) const { return x * x; } };
struct Sign { template <class T> T operator()(T x) const { return T((x > 0) - (x < 0)); } };
struct Exp { template <class T> T operator()(T x) const { return std::exp(x); } };
struct Log { template <class T> T operator()(T x) const { return std::log(x); } };
struct Sqrt { template <class T> T operator()(T x) const { return std::sqrt(x); } };
struct Rsqrt { template <class T> T operator()(T x) const { return T(1) / std::sqrt(x); } };
struct Reciprocal { template <class T> T operator()(T x) const { return T(1) / x; } };
struct Tanh { template <class T> T operator()(T x) const { return std::tanh(x); } };
struct Sigmoid { template <class T> T operator()(T x) const { return T(1) / (T(1) + std::exp(-x)); } };
struct Silu { template <class T> T operator()(T x) const { return x / (T(1) + std::exp(-x)); } };
struct Sin { template <class T> T operator()(T x) const { return std::sin(x); } };
struct Cos { template <class T> T operator()(T x) const { return std::cos(x); } };
struct Erf { template <class T> T operator()(T x) const { return std::erf(x); } };
struct GeluErf {
  template <class T> T operator()(T x) const {
    return T(0.5) * x * (T(1) + std::erf(x * T(1 / std::numbers::sqrt2)));
  }
};
struct GeluTanh {
  template <class T> T operator()(T x) const {
    const T k = T(std::sqrt(2 / std::numbers::pi));
    return T(0.5) * x * (T(1) + std::tanh(k * (x + T(0.044715) * x * x * x)));
  }
};

template <class F>
void float_unary(const KernelArgs& a) {
  visit_floating(a.in[0].dtype, a.op.name.c_str(), [&](auto tag) {
    using T = decltype(tag);
    map<T, T>(a.out[0], F{}, {&a.in[0]});
  });
}

template <class F>
void numeric_unary(const KernelArgs& a) {
  visit_numeric(a.in[0].dtype, a.op.name.c_str(), [&](auto tag) {
    using T = decltype(tag);
    map<T, T>(a.out[0], F{}, {&a.in[0]});
  });
}

void gelu(const KernelArgs& a) {
  if (a.attrs.b("tanh_approximation")) float_unary<GeluTanh>(a);
  else float_unary<GeluErf>(a);
}

void logical_not(const KernelArgs& a) {
  map<bool, bool>(a.out[0], [](bool x) { return !x; }, {&a.in[0]});
}

// Binary functors.
struct Add { template <class T> T operator()(T x, T y) const { return x + y; } };
struct Sub { template <class T> T operator()(T x, T y) const { return x - y; } };
struct Mul { template <class T> T operator()(T x, T y) const { return x * y; } };
struct Div { template <class T> T operator()(T x, T y) const { return x / y; } };
struct Pow { template <class T> T operator()(T x, T y) const { return std::pow(x, y); } };
// NaN propagates, as in torch.maximum.
struct Maximum {
  template <class T> T operator()(T x, T y) const { return x != x ? x : (y != y ? y : (x > y ? x : y)); }
};
struct Minimum {
  template <class T> T operator()(T x, T y) const { return x != x ? x : (y != y ? y : (x < y ? x : y)); }
};
struct Eq { template <class T> bool operator()(T x, T y) const { return x == y; } };
struct Ne { template <class T> bool operator()(T x, T y) const { return x != y; } };
struct Lt { template <class T> bool operator()(T x, T y) const { return x < y; } };
struct Le { template <class T> bool operator()(T x, T y) const { return x <= y; } };
struct Gt { template <class T> bool operator()(T x, T y) const { return x > y; } };
struct Ge { template <class T> bool operator()(T x, T y) const { return x >= y; } };
struct And { bool operator()(bool x, bool y) const { return x && y; } };
struct Or { bool operator()(bool x, bool y) const { return x || y; } };

template <class F>
void numeric_binary(const KernelArgs& a) {
  visit_numeric(a.in[0].dtype, a.op.name.c_str(), [&](auto tag) {
    using T = decltype(tag);
    map<T, T, T>(a.out[0], F{}, {&a.in[0], &a.in[1]});
  });
}

template <class F>
void float_binary(const KernelArgs& a) {
  visit_floating(a.in[0].dtype, a.op.name.c_str(), [&](auto tag) {
    using T = decltype(tag);
    map<T, T, T>(a.out[0], F{}, {&a.in[0], &a.in[1]});
  });
}

template <class F>
void compare(const KernelArgs& a) {
  if (a.in[0].dtype == DType::b8) {
    map<bool, bool, bool>(a.out[0], F{}, {&a.in[0], &a.in[1]});
    return;
  }
  visit_numeric(a.in[0].dtype, a.op.name.c_str(), [&](auto tag) {
    using T = decltype(tag);
    map<bool, T, T>(a.out[0], F{}, {&a.in[0], &a.in[1]});
  });
}

template <class F>
void logical(const KernelArgs& a) {
  map<bool, bool, bool>(a.out[0], F{}, {&a.in[0], &a.in[1]});
}

void where(const KernelArgs& a) {
  visit_dtype(a.in[1].dtype, [&](auto tag) {
    using T = decltype(tag);
    map<T, bool, T, T>(a.out[0], [](bool c, auto x, auto y) { return c ? x : y; },
                       {&a.in[0], &a.in[1], &a.in[2]});
  });
}

constexpr DeviceKind kCpu = DeviceKind::cpu;
const KernelRegistrar registrations[] = {
    {kCpu, "neg", {numeric_unary<Neg>, true}},
    {kCpu, "abs", {numeric_unary<Abs>, true}},
    {kCpu, "square", {numeric_unary<Square>, true}},
    {kCpu, "sign", {numeric_unary<Sign>, true}},
    {kCpu, "exp", {float_unary<Exp>, true}},
    {kCpu, "log", {float_unary<Log>, true}},
    {kCpu, "sqrt", {float_unary<Sqrt>, true}},
    {kCpu, "rsqrt", {float_unary<Rsqrt>, true}},
    {kCpu, "reciprocal", {float_unary<Reciprocal>, true}},
    {kCpu, "tanh", {float_unary<Tanh>, true}},
    {kCpu, "sigmoid", {float_unary<Sigmoid>, true}},
    {kCpu, "silu", {float_unary<Silu>, true}},
    {kCpu, "gelu", {gelu, true}},
    {kCpu, "sin", {float_unary<Sin>, true}},
    {kCpu, "cos", {float_unary<Cos>, true}},
    {kCpu, "erf", {float_unary<Erf>, true}},
    {kCpu, "logical_not", {logical_not, true}},
    {kCpu, "add", {numeric_binary<Add>, true}},
    {kCpu, "sub", {numeric_binary<Sub>, true}},
    {kCpu, "mul", {numeric_binary<Mul>, true}},
    {kCpu, "div", {float_binary<Div>, true}},
    {kCpu, "pow", {float_binary<Pow>, true}},
    {kCpu, "maximum", {numeric_binary<Maximum>, true}},
    {kCpu, "minimum", {numeric_binary<Minimum>, true}},
    {kCpu, "eq", {compare<Eq>, true}},
    {kCpu, "ne", {compare<Ne>, true}},
    {kCpu, "lt", {compare<Lt>, true}},
    {kCpu, "le", {compare<Le>, true}},
    {kCpu, "gt", {compare<Gt>, true}},
    {kCpu, "ge", {compare<Ge>, true}},
    {kCpu, "logical_and", {logical<And>, true}},
    {kCpu, "logical_or", {logical<Or>, true}},
    {kCpu, "where", {where, true}},
};

}  // namespace
}  // namespace kiln::cpu
