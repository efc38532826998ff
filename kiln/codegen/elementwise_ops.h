// The scalar math of every elementwise op: one functor per op, applied to
// compute-type values (float for f32/bf16/f16, double for f64, the integer
// type itself, bool). The CPU's eager kernels and interpreter, and the code
// generated for the CPU and for CUDA, all use these, so fused and unfused
// results are the same bits on a target. Self-contained (KILN_HD, math
// through codegen/math.h): the code generators embed this text.
//
// libkiln (CMakeLists.txt), the generated C++ (fused/toolchain.h) and NVRTC
// (--fmad=false) all keep `a * b + c` here two roundings; use math::fma where
// one rounding is wanted.
#pragma once
#include "kiln/base/host_device.h"
#include "kiln/codegen/math.h"

namespace kiln::codegen {

// Unary functors.
struct Neg { template <class T> KILN_HD KILN_FORCE_INLINE T operator()(T x) const { return -x; } };
struct Abs { template <class T> KILN_HD KILN_FORCE_INLINE T operator()(T x) const { return x < 0 ? -x : x; } };
struct Square { template <class T> KILN_HD KILN_FORCE_INLINE T operator()(T x) const { return x * x; } };
struct Sign { template <class T> KILN_HD KILN_FORCE_INLINE T operator()(T x) const { return T((x > 0) - (x < 0)); } };
struct Exp { template <class T> KILN_HD KILN_FORCE_INLINE T operator()(T x) const { return math::exp(x); } };
struct Log { template <class T> KILN_HD KILN_FORCE_INLINE T operator()(T x) const { return math::log(x); } };
struct Sqrt { template <class T> KILN_HD KILN_FORCE_INLINE T operator()(T x) const { return math::sqrt(x); } };
struct Rsqrt { template <class T> KILN_HD KILN_FORCE_INLINE T operator()(T x) const { return T(1) / math::sqrt(x); } };
struct Reciprocal { template <class T> KILN_HD KILN_FORCE_INLINE T operator()(T x) const { return T(1) / x; } };
struct Tanh { template <class T> KILN_HD KILN_FORCE_INLINE T operator()(T x) const { return math::tanh(x); } };
struct Sigmoid { template <class T> KILN_HD KILN_FORCE_INLINE T operator()(T x) const { return T(1) / (T(1) + math::exp(-x)); } };
struct Silu { template <class T> KILN_HD KILN_FORCE_INLINE T operator()(T x) const { return x / (T(1) + math::exp(-x)); } };
struct Sin { template <class T> KILN_HD KILN_FORCE_INLINE T operator()(T x) const { return math::sin(x); } };
struct Cos { template <class T> KILN_HD KILN_FORCE_INLINE T operator()(T x) const { return math::cos(x); } };
struct Erf { template <class T> KILN_HD KILN_FORCE_INLINE T operator()(T x) const { return math::erf(x); } };

// 1 / sqrt(2) and sqrt(2 / pi) in double, as std::numbers gives them
// (written out: NVRTC has no <numbers>; codegen/expr.cc checks them).
inline constexpr double kRsqrt2 = 0x1.6a09e667f3bccp-1;
inline constexpr double kSqrt2OverPi = 0x1.9884533d43651p-1;

struct GeluErf {
  template <class T> KILN_HD KILN_FORCE_INLINE T operator()(T x) const {
    return T(0.5) * x * (T(1) + math::erf(x * T(kRsqrt2)));
  }
};
struct GeluTanh {
  template <class T> KILN_HD KILN_FORCE_INLINE T operator()(T x) const {
    const T k = T(kSqrt2OverPi);
    return T(0.5) * x * (T(1) + math::tanh(k * math::fma(T(0.044715) * x * x, x, x)));
  }
};
struct Not { KILN_HD KILN_FORCE_INLINE bool operator()(bool x) const { return !x; } };

// Binary functors.
struct Add { template <class T> KILN_HD KILN_FORCE_INLINE T operator()(T x, T y) const { return x + y; } };
struct Sub { template <class T> KILN_HD KILN_FORCE_INLINE T operator()(T x, T y) const { return x - y; } };
struct Mul { template <class T> KILN_HD KILN_FORCE_INLINE T operator()(T x, T y) const { return x * y; } };
struct Div { template <class T> KILN_HD KILN_FORCE_INLINE T operator()(T x, T y) const { return x / y; } };
struct Pow { template <class T> KILN_HD KILN_FORCE_INLINE T operator()(T x, T y) const { return math::pow(x, y); } };
// NaN propagates, as in torch.maximum.
struct Maximum {
  template <class T> KILN_HD KILN_FORCE_INLINE T operator()(T x, T y) const { return x != x ? x : (y != y ? y : (x > y ? x : y)); }
};
struct Minimum {
  template <class T> KILN_HD KILN_FORCE_INLINE T operator()(T x, T y) const { return x != x ? x : (y != y ? y : (x < y ? x : y)); }
};
struct Eq { template <class T> KILN_HD KILN_FORCE_INLINE bool operator()(T x, T y) const { return x == y; } };
struct Ne { template <class T> KILN_HD KILN_FORCE_INLINE bool operator()(T x, T y) const { return x != y; } };
struct Lt { template <class T> KILN_HD KILN_FORCE_INLINE bool operator()(T x, T y) const { return x < y; } };
struct Le { template <class T> KILN_HD KILN_FORCE_INLINE bool operator()(T x, T y) const { return x <= y; } };
struct Gt { template <class T> KILN_HD KILN_FORCE_INLINE bool operator()(T x, T y) const { return x > y; } };
struct Ge { template <class T> KILN_HD KILN_FORCE_INLINE bool operator()(T x, T y) const { return x >= y; } };
struct And { KILN_HD KILN_FORCE_INLINE bool operator()(bool x, bool y) const { return x && y; } };
struct Or { KILN_HD KILN_FORCE_INLINE bool operator()(bool x, bool y) const { return x || y; } };

// The op families as lists of X(op name, functor), expanded by the CPU's
// eager kernel table and interpreter and by the code generators' plan, so an
// op added here reaches every one. (gelu, where, cast, copy and the creation
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

}  // namespace kiln::codegen
