// Elementwise kernels: the functors of codegen/elementwise_ops.h over the
// strided map engine.
// 16-bit floats compute in f32; integer ops compute in their own type.
#include "kiln/backend/cpu/isa.h"
#include "kiln/backend/cpu/loops.h"
#include "kiln/base/error.h"
#include "kiln/codegen/elementwise_ops.h"
#include "kiln/runtime/backend.h"

namespace kiln::cpu {
namespace {

using namespace codegen;  // the functors

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

template <class F>
void logical_unary(const KernelArgs& a) {
  map<bool, bool>(a.out[0], F{}, {&a.in[0]});
}

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
#define KILN_KERNEL(family, op, F) {kCpu, #op, {family<F>, true}},
#define KILN_NUMERIC_UNARY(op, F) KILN_KERNEL(numeric_unary, op, F)
#define KILN_FLOAT_UNARY(op, F) KILN_KERNEL(float_unary, op, F)
#define KILN_LOGICAL_UNARY(op, F) KILN_KERNEL(logical_unary, op, F)
#define KILN_NUMERIC_BINARY(op, F) KILN_KERNEL(numeric_binary, op, F)
#define KILN_FLOAT_BINARY(op, F) KILN_KERNEL(float_binary, op, F)
#define KILN_COMPARE(op, F) KILN_KERNEL(compare, op, F)
#define KILN_LOGICAL_BINARY(op, F) KILN_KERNEL(logical, op, F)
const IsaKernelRegistrar registrations[] = {
    KILN_NUMERIC_UNARY_OPS(KILN_NUMERIC_UNARY)
    KILN_FLOAT_UNARY_OPS(KILN_FLOAT_UNARY)
    KILN_LOGICAL_UNARY_OPS(KILN_LOGICAL_UNARY)
    KILN_NUMERIC_BINARY_OPS(KILN_NUMERIC_BINARY)
    KILN_FLOAT_BINARY_OPS(KILN_FLOAT_BINARY)
    KILN_COMPARE_OPS(KILN_COMPARE)
    KILN_LOGICAL_BINARY_OPS(KILN_LOGICAL_BINARY)
    {kCpu, "gelu", {gelu, true}},
    {kCpu, "where", {where, true}},
};

}  // namespace
}  // namespace kiln::cpu
