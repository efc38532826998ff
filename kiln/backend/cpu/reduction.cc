// The reduction ops' kernels: sum, mean, max, min, argmax, logsumexp, var,
// and the softmaxes (reductions along one axis plus an elementwise pass).
// Floats accumulate in f32 (f64 for f64), integers in i64; all folds go
// through the engine in reduction_engine.h, so results do not depend on the
// thread count.
#include <cmath>
#include <limits>

#include "kiln/backend/cpu/isa.h"
#include "kiln/backend/cpu/loops.h"
#include "kiln/backend/cpu/reduction_engine.h"
#include "kiln/codegen/math.h"
#include "kiln/base/error.h"

namespace kiln::cpu {
namespace {

// x -> f(x - shift[out]) summed: the second pass of logsumexp and var.
template <class T, class F>
struct ShiftedSumOp {
  using C = compute_t<T>;
  const std::vector<C>& shift;
  F f;
  C identity = 0;
  C combine(C a, C b) const { return a + b; }
  C load(T x, int64_t o) const { return f(widen(x) - shift[o]); }
};
template <class T, class F>
ShiftedSumOp<T, F> shifted_sum(const std::vector<compute_t<T>>& shift, F f) {
  return {shift, f};
}

// Calls f(T{}) for the floating dtypes (the shape rules admit no others).
template <class F>
void visit_floating(DType t, F&& f) {
  switch (t) {
    case DType::f32: return f(float{});
    case DType::bf16: return f(bf16{});
    case DType::f16: return f(f16{});
    case DType::f64: return f(double{});
    default: fail("reduction kernel: dtype ", dtype_name(t), " is not floating");
  }
}

// Calls f(T{}) for every dtype but bool.
template <class F>
void visit_numeric(DType t, F&& f) {
  KILN_CHECK(t != DType::b8, "reduction kernel: bool inputs are not supported here");
  visit_dtype(t, [&](auto tag) {
    if constexpr (!std::is_same_v<decltype(tag), bool>) f(tag);
  });
}

// Per-output sums of exp(x - shift[o]).
template <class T>
std::vector<compute_t<T>> exp_sums(const ReducePlan& plan, const TensorRef& in,
                                   const std::vector<compute_t<T>>& shift) {
  return reduce<T, compute_t<T>>(
      plan, in, shifted_sum<T>(shift, [](auto d) { return codegen::math::exp(d); }));
}

// Per-output maxima made safe to subtract: non-finite ones become 0, so a
// row of -inf gives exp(-inf) = 0 and an inf or NaN propagates.
template <class T>
std::vector<compute_t<T>> stable_shift(const ReducePlan& plan, const TensorRef& in) {
  auto m = reduce<T, compute_t<T>>(plan, in, ExtremumOp<T, true>{});
  for (auto& v : m) v = std::isfinite(v) ? v : 0;
  return m;
}

void sum_kernel(const KernelArgs& a) {
  ReducePlan plan = make_plan(a.in[0], reduced_axes(a));
  visit_dtype(a.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    auto s = reduce<T, sum_acc_t<T>>(plan, a.in[0], SumOp<T, sum_acc_t<T>>{});
    write_results(a.out[0], [&](int64_t o) { return s[o]; });
  });
}

void mean_kernel(const KernelArgs& a) {
  ReducePlan plan = make_plan(a.in[0], reduced_axes(a));
  visit_floating(a.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    using Acc = sum_acc_t<T>;
    auto s = reduce<T, Acc>(plan, a.in[0], SumOp<T, Acc>{});
    Acc n = Acc(plan.length());
    write_results(a.out[0], [&](int64_t o) { return s[o] / n; });
  });
}

template <bool kMax>
void extremum_kernel(const KernelArgs& a) {
  ReducePlan plan = make_plan(a.in[0], reduced_axes(a));
  visit_numeric(a.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    auto m = reduce<T, compute_t<T>>(plan, a.in[0], ExtremumOp<T, kMax>{});
    write_results(a.out[0], [&](int64_t o) { return m[o]; });
  });
}

void logsumexp_kernel(const KernelArgs& a) {
  ReducePlan plan = make_plan(a.in[0], reduced_axes(a));
  visit_floating(a.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    auto shift = stable_shift<T>(plan, a.in[0]);
    auto s = exp_sums<T>(plan, a.in[0], shift);
    write_results(a.out[0], [&](int64_t o) { return shift[o] + codegen::math::log(s[o]); });
  });
}

// Two passes (mean, then squared deviations) for accuracy.
void var_kernel(const KernelArgs& a) {
  ReducePlan plan = make_plan(a.in[0], reduced_axes(a));
  visit_floating(a.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    C n = C(plan.length());
    auto mean = reduce<T, C>(plan, a.in[0], SumOp<T, C>{});
    for (C& m : mean) m /= n;
    auto dev = reduce<T, C>(plan, a.in[0], shifted_sum<T>(mean, [](auto d) { return d * d; }));
    // As torch.var: a non-positive denominator gives inf or NaN.
    C denom = std::max<C>(0, n - C(a.attrs.i("correction")));
    write_results(a.out[0], [&](int64_t o) { return dev[o] / denom; });
  });
}

// The first maximum (a NaN counts as the maximum, the first NaN wins): the
// maximum by the engine, then a scan for its first occurrence.
void argmax_kernel(const KernelArgs& a) {
  ReducePlan plan = make_plan(a.in[0], reduced_axes(a));
  const int64_t length = plan.length();
  const int64_t stride = plan.reduced.empty() ? 0 : plan.reduced_strides[0];
  int64_t* out = a.out[0].ptr<int64_t>();
  visit_numeric(a.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    auto m = reduce<T, C>(plan, a.in[0], ExtremumOp<T, true>{});
    const T* in = a.in[0].ptr<T>();
    parallel_for(plan.outputs(), length, [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) {
        const T* p = in + offset_of(o, plan.kept, plan.kept_strides);
        const C best = m[o];
        const bool nan = best != best;
        int64_t r = 0;
        for (; r + 1 < length; ++r) {
          C v = widen(p[r * stride]);
          if (v == best || (nan && v != v)) break;
        }
        out[o] = r;
      }
    });
  });
}

// softmax = exp(x - m) / sum, log_softmax = (x - m) - log(sum), with m the
// row maximum; `per_row` holds sum or log(sum).
template <bool kLog>
void softmax_kernel(const KernelArgs& a) {
  const TensorRef& in = a.in[0];
  const TensorRef& out = a.out[0];
  ReducePlan plan = make_plan(in, reduced_axes(a));
  visit_floating(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    auto shift = stable_shift<T>(plan, in);
    auto per_row = exp_sums<T>(plan, in, shift);
    if constexpr (kLog)
      for (C& v : per_row) v = codegen::math::log(v);
    auto f = [](C x, C m, C t) -> C {
      if constexpr (kLog) return (x - m) - t;
      else return codegen::math::exp(x - m) / t;
    };
    const int64_t length = plan.length();
    if (in.contiguous() && plan.reduced.size() == 1 && plan.reduced_strides[0] == 1) {
      // Rows are contiguous in input and output (the innermost axis).
      const T* x = in.ptr<T>();
      T* y = out.ptr<T>();
      parallel_for(plan.outputs(), length, [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o) {
          const T* xr = x + o * length;
          T* yr = y + o * length;
          const C m = shift[o], t = per_row[o];
#pragma omp simd
          for (int64_t i = 0; i < length; ++i) yr[i] = narrow<T>(f(widen(xr[i]), m, t));
        }
      });
      return;
    }
    // Otherwise the per-row values broadcast back through the strided map.
    Shape row_shape = in.shape;
    if (in.rank() > 0)
      row_shape[normalize_axis(a.attrs.i("axis"), in.rank(), a.op.name.c_str())] = 1;
    TensorRef shift_ref{shift.data(), dtype_of<C>::value, row_shape, contiguous_strides(row_shape)};
    TensorRef row_ref{per_row.data(), dtype_of<C>::value, row_shape, contiguous_strides(row_shape)};
    map<T, T, C, C>(out, f, {&in, &shift_ref, &row_ref});
  });
}

const IsaKernelRegistrar registrations[] = {
    {DeviceKind::cpu, "sum", {sum_kernel, true}},
    {DeviceKind::cpu, "mean", {mean_kernel, true}},
    {DeviceKind::cpu, "max", {extremum_kernel<true>, true}},
    {DeviceKind::cpu, "min", {extremum_kernel<false>, true}},
    {DeviceKind::cpu, "argmax", {argmax_kernel, true}},
    {DeviceKind::cpu, "logsumexp", {logsumexp_kernel, true}},
    {DeviceKind::cpu, "var", {var_kernel, true}},
    {DeviceKind::cpu, "softmax", {softmax_kernel<false>, true}},
    {DeviceKind::cpu, "log_softmax", {softmax_kernel<true>, true}},
};

}  // namespace
}  // namespace kiln::cpu
