// Kernels of argmax, logsumexp, var, softmax and log_softmax: one block per
// result row, folding in the CPU's canonical order (row_fold.cuh), with the
// CPU kernels' arithmetic (kiln/backend/cpu/reduction.cc): floats compute in
// f32 (f64 for f64), integers in their own type. Sums and maxima are the
// CPU's bits; exp and log are CUDA's (expf within 2 ulp, the CPU's own f32
// exp within 1), so logsumexp and the softmaxes differ from the CPU's in the
// last bits. The sum, mean, max and min ops live with the code generator.
#include <vector>

#include "kiln/backend/cuda/kernels/row_fold.cuh"
#include "kiln/backend/cuda/layout.cuh"
#include "kiln/codegen/math.h"
#include "kiln/runtime/kernel_layout.h"

namespace kiln::cuda {
namespace {

namespace math = codegen::math;

// The input split into the kept axes (one row per position, row-major, as
// the contiguous output) and the reduced ones (a row's elements, row-major).
struct RowPlan {
  Layout kept, reduced;
  long long rows, length;
  __device__ long long offset(long long row, long long r) const {
    return offset_of(kept, row) + offset_of(reduced, r);
  }
};

RowPlan plan_of(const Shape& shape, const Strides& strides, const std::vector<bool>& reduced) {
  Shape ks, rs;
  Strides kst, rst;
  for (int d = 0; d < shape.size(); ++d) {
    (reduced[d] ? rs : ks).push_back(shape[d]);
    (reduced[d] ? rst : kst).push_back(strides[d]);
  }
  return {layout_of(ks, kst), layout_of(rs, rst), ks.numel(), rs.numel()};
}

// The input's plan and, for the softmaxes, the output's (contiguous).
RowPlan input_plan(const KernelArgs& a) {
  return plan_of(a.in[0].shape, a.in[0].strides, reduced_axes(a));
}
RowPlan output_plan(const KernelArgs& a) {
  return plan_of(a.in[0].shape, contiguous_strides(a.in[0].shape), reduced_axes(a));
}

template <class T> using MaxOp = ExtremumOp<T, true>;

// A row's elements in the compute type.
template <class T>
struct RowLoad {
  const T* x;
  const RowPlan& p;
  long long row;
  __device__ compute_t<T> operator()(long long r) const { return widen(x[p.offset(row, r)]); }
};

// The row maximum made safe to subtract: a non-finite one becomes 0, so a
// row of -inf gives exp(-inf) = 0 and an inf or NaN propagates.
template <class T>
__device__ compute_t<T> stable_shift(const RowLoad<T>& at, MaxOp<T> mx) {
  const compute_t<T> m = block_fold(mx, at.p.length, at);
  return isfinite(m) ? m : compute_t<T>(0);
}

// Sum of exp(x - shift) over the row.
template <class T>
__device__ compute_t<T> exp_sum(const RowLoad<T>& at, compute_t<T> shift) {
  using C = compute_t<T>;
  return block_fold(SumOp<T, C>{}, at.p.length, [&](long long r) { return math::exp(at(r) - shift); });
}

// Runs kernel<<<rows>>> (one block per row; grid-strided beyond 2^20 rows).
template <class K, class... A>
void launch_rows(K kernel, long long rows, A... args) {
  if (rows <= 0) return;
  kernel<<<unsigned(std::min(rows, 1LL << 20)), kFoldThreads, 0, current_stream()>>>(args...);
  KILN_CUDA_CHECK_LAUNCH();
}

template <class T>
__global__ void logsumexp_k(const T* x, RowPlan p, MaxOp<T> mx, T* out) {
  for (long long row = blockIdx.x; row < p.rows; row += gridDim.x) {
    RowLoad<T> at{x, p, row};
    const compute_t<T> shift = stable_shift(at, mx);
    const compute_t<T> s = exp_sum(at, shift);
    if (threadIdx.x == 0) out[row] = narrow<T>(shift + math::log(s));
  }
}

// Two passes (mean, then squared deviations) for accuracy, as the CPU.
template <class T>
__global__ void var_k(const T* x, RowPlan p, long long correction, T* out) {
  using C = compute_t<T>;
  for (long long row = blockIdx.x; row < p.rows; row += gridDim.x) {
    RowLoad<T> at{x, p, row};
    const C n = C(p.length);
    const C mean = block_fold(SumOp<T, C>{}, p.length, at) / n;
    const C dev = block_fold(SumOp<T, C>{}, p.length, [&](long long r) {
      const C d = at(r) - mean;
      return d * d;
    });
    // As torch.var: a non-positive denominator gives inf or NaN.
    const C denom = C(0) < n - C(correction) ? n - C(correction) : C(0);
    if (threadIdx.x == 0) out[row] = narrow<T>(dev / denom);
  }
}

// softmax = exp(x - m) / sum, log_softmax = (x - m) - log(sum).
template <class T, bool kLog>
__global__ void softmax_k(const T* x, RowPlan p, RowPlan q, MaxOp<T> mx, T* out) {
  using C = compute_t<T>;
  for (long long row = blockIdx.x; row < p.rows; row += gridDim.x) {
    RowLoad<T> at{x, p, row};
    const C shift = stable_shift(at, mx);
    const C s = exp_sum(at, shift);
    const C t = kLog ? math::log(s) : s;
    for (long long r = threadIdx.x; r < p.length; r += blockDim.x) {
      const C v = at(r) - shift;
      out[q.offset(row, r)] = narrow<T>(kLog ? v - t : math::exp(v) / t);
    }
  }
}

// The first maximum (a NaN counts as the maximum, the first NaN wins): the
// maximum, then the least position holding it.
template <class T>
__global__ void argmax_k(const T* x, RowPlan p, MaxOp<T> mx, int64_t* out) {
  using C = compute_t<T>;
  const ExtremumOp<int64_t, false> first;
  for (long long row = blockIdx.x; row < p.rows; row += gridDim.x) {
    RowLoad<T> at{x, p, row};
    const C best = block_fold(mx, p.length, at);
    const bool nan = best != best;
    const int64_t r = block_fold(first, p.length, [&](long long i) {
      const C v = at(i);
      return v == best || (nan && v != v) ? int64_t(i) : first.identity;
    });
    if (threadIdx.x == 0) out[row] = r < p.length ? r : 0;  // an empty row gives 0, as on the CPU
  }
}

void check_same_dtype(const KernelArgs& a) {
  KILN_CHECK(a.out[0].dtype == a.in[0].dtype, a.op.name, " (CUDA): output dtype ",
             dtype_name(a.out[0].dtype), " differs from the input's ", dtype_name(a.in[0].dtype));
}

void logsumexp_kernel(const KernelArgs& a) {
  check_same_dtype(a);
  visit_floating_storage(a.in[0].dtype, a.op.name, [&](auto tag) {
    using T = decltype(tag);
    RowPlan p = input_plan(a);
    launch_rows(logsumexp_k<T>, p.rows, a.in[0].ptr<const T>(), p, MaxOp<T>{},
                a.out[0].ptr<T>());
  });
}

void var_kernel(const KernelArgs& a) {
  check_same_dtype(a);
  visit_floating_storage(a.in[0].dtype, a.op.name, [&](auto tag) {
    using T = decltype(tag);
    RowPlan p = input_plan(a);
    launch_rows(var_k<T>, p.rows, a.in[0].ptr<const T>(), p, (long long)a.attrs.i("correction"),
                a.out[0].ptr<T>());
  });
}

template <bool kLog>
void softmax_kernel(const KernelArgs& a) {
  check_same_dtype(a);
  visit_floating_storage(a.in[0].dtype, a.op.name, [&](auto tag) {
    using T = decltype(tag);
    RowPlan p = input_plan(a);
    launch_rows(softmax_k<T, kLog>, p.rows, a.in[0].ptr<const T>(), p, output_plan(a),
                MaxOp<T>{}, a.out[0].ptr<T>());
  });
}

void argmax_kernel(const KernelArgs& a) {
  KILN_CHECK(a.in[0].dtype != DType::b8, "argmax (CUDA): bool input is not supported");
  visit_dtype(a.in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) {
      RowPlan p = input_plan(a);
      launch_rows(argmax_k<T>, p.rows, a.in[0].ptr<const T>(), p, MaxOp<T>{},
                  a.out[0].ptr<int64_t>());
    }
  });
}

const KernelRegistrar registrations[] = {
    {DeviceKind::cuda, "argmax", {argmax_kernel, true}},
    {DeviceKind::cuda, "logsumexp", {logsumexp_kernel, true}},
    {DeviceKind::cuda, "var", {var_kernel, true}},
    {DeviceKind::cuda, "softmax", {softmax_kernel<false>, true}},
    {DeviceKind::cuda, "log_softmax", {softmax_kernel<true>, true}},
};

}  // namespace
}  // namespace kiln::cuda
