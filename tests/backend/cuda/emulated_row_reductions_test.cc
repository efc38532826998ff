// CUDA's row kernels of logsumexp, var, softmax, log_softmax and argmax
// (kiln/backend/cuda/kernels/reduction.cuh), and of topk, run on the CPU
// (tests/backend/cuda/emulated.h) with their .cu files' launches, against
// the CPU's kernels. They fold in the CPU's canonical order (row_fold.cuh), and
// on the host their exp and log are the CPU's, so every result must be the
// CPU's bits. The layouts: short rows (a partial warp), a reduced middle
// axis, a transposed input, every axis, and rows of more chunks (4096) than
// a block has warps, which fold in two groups.
#include "tests/backend/cuda/emulated.h"  // first: the kernels compile for the host

#include "kiln/backend/cuda/kernels/reduction.cuh"
#include "kiln/backend/cuda/kernels/topk.cuh"

#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "kiln/runtime/dispatch.h"
#include "kiln/runtime/tensor.h"
#include "tests/backend/cuda/emulated_checks.h"
#include "tests/support/spread_values.h"

namespace kiln {
namespace {

namespace emulated = cuda::emulated;
using namespace cuda::rowwise;
using test::element_bytes;
using test::expect_cpu_bits;
using test::host;
using test::spread_tensor;

// An input: `storage`'s elements (contiguous), read as a tensor of `shape`
// through `strides`; `view` is the same tensor for the CPU.
struct Input {
  std::string name;
  Tensor storage, view;
  Strides strides;
  int axis;  // the reduced axis; -1: every axis (logsumexp and var only)
};

std::vector<Input> inputs(DType t) {
  std::vector<Input> in;
  auto plain = [&](const char* name, const Shape& s, int axis, uint32_t seed) {
    const Tensor x = spread_tensor(t, s, seed);
    in.push_back({name, x, x, contiguous_strides(s), axis});
  };
  plain("short rows", {5, 77}, 1, 1);
  plain("middle axis", {3, 50, 4}, 1, 2);
  plain("every axis", {4, 9, 7}, -1, 3);
  plain("rows of 10 chunks", {2, 40000}, 1, 4);
  const Tensor x = spread_tensor(t, {40, 6}, 5);
  in.push_back({"transposed", x, x.permute({1, 0}), Strides{1, 6}, 1});
  return in;
}

std::vector<bool> reduced(const Input& in) {
  std::vector<bool> r(size_t(in.view.shape().size()), in.axis < 0);
  if (in.axis >= 0) r[size_t(in.axis)] = true;
  return r;
}

// A launch as reduction.cu's launch_rows makes it.
template <class K, class... A>
void launch_rows(K kernel, long long rows, A... args) {
  emulated::launch(dim3(cuda::row_grid(rows)), cuda::kFoldThreads, 0, kernel, args...);
}

const ir::OpDef& op(const char* name) { return ir::get_op(name); }

Tensor on_cpu(const char* name, const Tensor& x, const ir::Attrs& attrs) {
  return apply(op(name), std::vector<Tensor>{x}, attrs, kCPU)[0];
}

template <class T>
void check_floating(DType dt) {
  for (const Input& in : inputs(dt)) {
    const std::string what = cat(dtype_name(dt), ", ", in.name);
    const std::vector<T> x = host<T>(in.storage);
    const Shape& shape = in.view.shape();
    const RowPlan p = plan_of(shape, in.strides, reduced(in));
    const ir::IntList axes = in.axis < 0 ? ir::IntList{} : ir::IntList{in.axis};

    std::vector<T> lse(static_cast<size_t>(p.rows)), var(static_cast<size_t>(p.rows));
    launch_rows(logsumexp_k<T>, p.rows, x.data(), p, MaxOp<T>{}, lse.data());
    expect_cpu_bits(lse, on_cpu("logsumexp", in.view, {{"axes", axes}}), "logsumexp " + what);
    launch_rows(var_k<T>, p.rows, x.data(), p, 1LL, var.data());
    expect_cpu_bits(var, on_cpu("var", in.view, {{"axes", axes}, {"correction", int64_t{1}}}), "var " + what);
    if (in.axis < 0) continue;

    const RowPlan q = plan_of(shape, contiguous_strides(shape), reduced(in));
    std::vector<T> soft(static_cast<size_t>(shape.numel())), log_soft(static_cast<size_t>(shape.numel()));
    launch_rows(softmax_k<T, false>, p.rows, x.data(), p, q, MaxOp<T>{}, soft.data());
    launch_rows(softmax_k<T, true>, p.rows, x.data(), p, q, MaxOp<T>{}, log_soft.data());
    expect_cpu_bits(soft, on_cpu("softmax", in.view, {{"axis", int64_t{in.axis}}}), "softmax " + what);
    expect_cpu_bits(log_soft, on_cpu("log_softmax", in.view, {{"axis", int64_t{in.axis}}}), "log_softmax " + what);
  }
}

TEST(EmulatedRowReductions, FloatingResultsAreTheCpusBits) {
  check_floating<float>(DType::f32);
  check_floating<bf16>(DType::bf16);
  check_floating<f16>(DType::f16);
  check_floating<double>(DType::f64);
}

template <class T>
void check_argmax(DType dt) {
  for (const Input& in : inputs(dt)) {
    if (in.axis < 0) continue;
    const std::vector<T> x = host<T>(in.storage);
    const RowPlan p = plan_of(in.view.shape(), in.strides, reduced(in));
    std::vector<int64_t> got(static_cast<size_t>(p.rows));
    launch_rows(argmax_k<T>, p.rows, x.data(), p, MaxOp<T>{}, got.data());
    expect_cpu_bits(got, on_cpu("argmax", in.view, {{"axis", int64_t{in.axis}}}),
                    cat("argmax ", dtype_name(dt), ", ", in.name));
  }
}

TEST(EmulatedRowReductions, ArgmaxIsTheCpus) {
  check_argmax<float>(DType::f32);
  check_argmax<bf16>(DType::bf16);
  check_argmax<double>(DType::f64);
  check_argmax<int32_t>(DType::i32);
  check_argmax<int64_t>(DType::i64);
}

TEST(EmulatedRowReductions, ArgmaxTakesTheFirstNaN) {
  std::vector<float> v(2 * 9000, 1.0f);
  v[7000] = v[8000] = std::numeric_limits<float>::quiet_NaN();  // row 0, chunk 1
  v[9000 + 3] = 2.0f;
  v[9000 + 8999] = 2.0f;  // a tie: the first wins
  const Tensor x = from_vector(v, {2, 9000});
  const RowPlan p = plan_of(x.shape(), contiguous_strides(x.shape()), {false, true});
  std::vector<int64_t> got(2);
  launch_rows(argmax_k<float>, p.rows, v.data(), p, MaxOp<float>{}, got.data());
  EXPECT_EQ(got, (std::vector<int64_t>{7000, 3}));
}

// topk along the middle axis of [outer, n, inner], as topk.cu launches it:
// values and indices (ties and NaNs in the CPU's total order) are the CPU's.
template <class T>
void check_topk(DType dt) {
  const long long outer = 3, n = 300, inner = 2, k = 6;
  Tensor x = spread_tensor(dt, {outer, n, inner}, 6);  // spread values tie every 7th
  if (dt == DType::f32) {
    std::vector<float> v = x.to_vector<float>();
    v[10] = v[401] = std::numeric_limits<float>::quiet_NaN();  // NaNs come first
    x = from_vector(v, x.shape());
  }
  const std::vector<T> hx = host<T>(x);
  const std::vector<Tensor> cpu = apply(op("topk"), std::vector<Tensor>{x}, {{"k", k}, {"axis", int64_t{1}}}, kCPU);
  std::vector<T> values(static_cast<size_t>(outer * k * inner));
  std::vector<int64_t> indices(values.size());
  const long long lines = outer * inner;
  emulated::launch(dim3(cuda::row_grid(lines)), cuda::topk::kThreads, 0, cuda::topk::topk_k<T>, hx.data(),
                   values.data(), indices.data(), lines, n, inner, k);
  expect_cpu_bits(values, cpu[0], cat("topk values ", dtype_name(dt)));
  expect_cpu_bits(indices, cpu[1], cat("topk indices ", dtype_name(dt)));
}

TEST(EmulatedRowReductions, TopkIsTheCpus) {
  check_topk<float>(DType::f32);
  check_topk<bf16>(DType::bf16);
  check_topk<int32_t>(DType::i32);
}

}  // namespace
}  // namespace kiln
