// The scalar math of every elementwise op: one functor per op, applied to
// compute-type values (float for f32/bf16/f16, double for f64, the integer
// type itself, bool). The eager kernels (elementwise.cc), the fused-kernel
// interpreter and the fused-kernel code generator all use these, so fused and
// unfused results are the same bits. Self-contained (standard headers only):
// the code generator embeds this text in the C++ it generates.
//
// libkiln (CMakeLists.txt) and the generated code (fused/toolchain.h) are
// both built with -ffp-contract=off, so `a * b + c` here rounds twice
// everywhere; use std::fma where one rounding is wanted.
#pragma once
#include <cmath>
#include <numbers>
#include <string_view>

namespace kiln::cpu {

// Unary functors.
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
    return T(0.5) * x * (T(1) + std::tanh(k * std::fma(T(0.044715) * x * x, x, x)));
  }
};
struct Not { bool operator()(bool x) const { return !x; } };

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

// Functors whose math calls the C library, which has no vector forms here:
// generated fused code gives each of them a loop of its own so that the
// arithmetic around them still vectorises. (Only speed depends on this.)
inline constexpr std::string_view kLibraryCallFunctors[] = {
    "Exp", "Log", "Tanh", "Sigmoid", "Silu", "Sin", "Cos", "Erf", "GeluErf", "GeluTanh", "Pow"};

// The op families as lists of X(op name, functor), expanded by the eager
// kernel table and by the fused-kernel interpreter and code generator, so an
// op added here reaches all three. (gelu, where, cast, copy and the creation
// ops take attributes or mixed types and are handled by each one itself.)
// Numeric: integers and floats; float: floats only; compare: any type in,
// bool out; logical: bool.
#define KILN_NUMERIC_UNARY_OPS(X) X(neg, Neg) X(abs, Abs) X(square, Square) X(sign, Sign)
#define KILN_FLOAT_UNARY_OPS(X)                                                           \
  X(exp, Exp) X(log, Log) X(sqrt, Sqrt) X(rsqrt, Rsqrt) X(reciprocal, Reciprocal)        \
  X(tanh, Tanh) X(sigmoid, Sigmoid) X(silu, Silu) X(sin, Sin) X(cos, Cos) X(erf, Erf)
#define KILN_LOGICAL_UNARY_OPS(X) X(logical_not, Not)
#define KILN_NUMERIC_BINARY_OPS(X) \
  X(add, Add) X(sub, Sub) X(mul, Mul) X(maximum, Maximum) X(minimum, Minimum)
#define KILN_FLOAT_BINARY_OPS(X) X(div, Div) X(pow, Pow)
#define KILN_COMPARE_OPS(X) X(eq, Eq) X(ne, Ne) X(lt, Lt) X(le, Le) X(gt, Gt) X(ge, Ge)
#define KILN_LOGICAL_BINARY_OPS(X) X(logical_and, And) X(logical_or, Or)

}  // namespace kiln::cpu
