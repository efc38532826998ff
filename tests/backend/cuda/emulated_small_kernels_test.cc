// CUDA's small kernels run on the CPU (tests/backend/cuda/emulated.h) with
// their .cu files' launches: the rank-ordered reduction of the NCCL group
// against kiln::dist::reduce_in_order (the host's, which MPI runs use), the
// random draws against the CPU's (every element a function of its Philox
// counter; on the host normal draws use glibc's functions, as the CPU does),
// the NaN/Inf scan, over a strided view, and the data-movement kernels: the
// strided copy between a permuted, broadcast view and a padded buffer, fill
// (pad and full) and the casts to and from a compute-type buffer.
#include "tests/backend/cuda/emulated.h"  // first: the kernels compile for the host

#include "kiln/backend/cuda/kernels/convert.cuh"
#include "kiln/backend/cuda/kernels/fill.cuh"
#include "kiln/backend/cuda/kernels/non_finite.cuh"
#include "kiln/backend/cuda/kernels/random.cuh"
#include "kiln/backend/cuda/kernels/rank_reduce.cuh"
#include "kiln/backend/cuda/kernels/strided_copy.cuh"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kiln/dist/reduce.h"
#include "kiln/ops/random.h"
#include "kiln/runtime/tensor.h"
#include "tests/backend/cuda/emulated_checks.h"
#include "tests/support/spread_values.h"

namespace kiln {
namespace {

using test::element_bytes;
using test::expect_cpu_bits;
using test::host;
using test::launch_n;
using test::spread_tensor;

// n parts of count elements each, stride apart in one buffer, reduced by
// the kernel and by reduce_in_order: the same bits.
template <class T>
void check_rank_reduce(DType dt, ReduceOp op) {
  const int n = 5;
  const long long count = 700, stride = 701;  // a gap between parts, as a strided receive buffer has
  Tensor all = spread_tensor(dt, {n * stride}, 11);
  if (is_floating(dt)) {  // NaNs in one part: max lets them win
    std::vector<double> v = all.to_vector<double>();
    v[size_t(2 * stride + 3)] = std::numeric_limits<double>::quiet_NaN();
    all = from_vector(v, all.shape()).to(dt);
  }
  const std::vector<T> parts = host<T>(all);
  std::vector<T> got(static_cast<size_t>(count)), want(static_cast<size_t>(count));
  launch_n(cuda::rank_reduce::rank_reduce_k<T>, count, got.data(), parts.data(), n, stride, op);
  std::vector<const void*> ptrs;
  for (int p = 0; p < n; ++p) ptrs.push_back(parts.data() + p * stride);
  dist::reduce_in_order(want.data(), ptrs, count, dt, op);
  const Tensor expected = from_host(want.data(), dt, {count});
  expect_cpu_bits(got, expected, cat("rank reduce ", dtype_name(dt), " op ", int(op)));
}

TEST(EmulatedSmallKernels, RankOrderedReduceIsTheHostsBits) {
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::max, ReduceOp::avg}) {
    check_rank_reduce<float>(DType::f32, op);
    check_rank_reduce<bf16>(DType::bf16, op);
    check_rank_reduce<f16>(DType::f16, op);
    check_rank_reduce<double>(DType::f64, op);
    if (op == ReduceOp::avg) continue;  // integers take no avg (process_group.cc refuses it)
    check_rank_reduce<int32_t>(DType::i32, op);
    check_rank_reduce<int64_t>(DType::i64, op);
  }
}

template <class T>
void check_random(DType dt) {
  using namespace cuda::rng;
  const long long n = 3000;
  const uint64_t seed = 1234, offset = 77;
  const std::string name = dtype_name(dt);
  std::vector<T> uniform_got(static_cast<size_t>(n)), normal_got(uniform_got.size()), coin_got(uniform_got.size());
  launch_n(uniform_k<T>, n, uniform_got.data(), Stream{seed, offset}, -2.0, 3.0);
  launch_n(normal_k<T>, n, normal_got.data(), Stream{seed, offset}, 0.5, 2.0);
  launch_n(bernoulli_k<T>, n, coin_got.data(), Stream{seed, offset}, 0.3);
  Generator g1(seed, offset), g2(seed, offset), g3(seed, offset);
  expect_cpu_bits(uniform_got, uniform({n}, -2.0, 3.0, g1, dt), "uniform " + name);
  expect_cpu_bits(normal_got, normal({n}, 0.5, 2.0, g2, dt), "normal " + name);
  expect_cpu_bits(coin_got, bernoulli({n}, 0.3, g3, dt), "bernoulli " + name);
}

TEST(EmulatedSmallKernels, RandomDrawsAreTheCpus) {
  check_random<float>(DType::f32);
  check_random<bf16>(DType::bf16);
  check_random<f16>(DType::f16);
  check_random<double>(DType::f64);
}

// The scan over a transposed view: the first NaN and the first infinity in
// the view's row-major order.
TEST(EmulatedSmallKernels, NonFiniteScanFindsTheFirstOfEach) {
  using cuda::non_finite::find_kernel;
  const long long rows = 40, cols = 30;  // the buffer; the view is its transpose
  std::vector<float> v(size_t(rows * cols), 1.0f);
  auto at = [&](long long r, long long c) -> float& { return v[size_t(c * rows + r)]; };  // view [r, c]
  at(25, 3) = std::numeric_limits<float>::quiet_NaN();  // view position 25 * 30 + 3 = 753
  at(30, 0) = std::numeric_limits<float>::quiet_NaN();  // 900: a later NaN
  at(4, 29) = -std::numeric_limits<float>::infinity();  // 149
  const cuda::Layout view = cuda::layout_of(Shape{rows, cols}, Strides{1, rows});
  unsigned long long first[2] = {~0ull, ~0ull};  // as non_finite.cu sets them
  cuda::emulated::launch(dim3(2), cuda::kBlock, 0, find_kernel<uint32_t, 0x7f800000u, 0x007fffffu>,
                         reinterpret_cast<const uint32_t*>(v.data()), view, rows * cols, first);
  EXPECT_EQ(first[0], 753u) << "the first NaN";
  EXPECT_EQ(first[1], 149u) << "the first infinity";
}

// src [4, 5] seen as [3, 5, 4] (transposed, the first dimension broadcast)
// into [3, 5, 4] inside a [3, 5, 6] buffer: the view's elements, moved as
// words of the dtype's size, and the padding untouched.
template <class W>
void check_strided_copy(DType dt) {
  const Tensor src = spread_tensor(dt, {4, 5}, 3);
  const std::vector<W> s = host<W>(src);
  std::vector<W> d(3 * 5 * 6);
  std::memset(d.data(), 0xA5, d.size() * sizeof(W));
  const W poison = d[0];
  launch_n(cuda::strided_copy_k<W>, 60, d.data(), cuda::layout_of(Shape{3, 5, 4}, Strides{30, 6, 1}),
           s.data(), cuda::layout_of(Shape{3, 5, 4}, Strides{0, 1, 5}));
  const std::vector<W> want = host<W>(src.permute({1, 0}).expand(Shape{3, 5, 4}).contiguous());
  for (int64_t i = 0; i < 3 * 5 * 6; ++i) {
    const int64_t row = i / 6, col = i % 6;
    const W expected = col < 4 ? want[size_t(row * 4 + col)] : poison;
    EXPECT_EQ(std::memcmp(&d[size_t(i)], &expected, sizeof(W)), 0)
        << dtype_name(dt) << " element " << i << (col < 4 ? "" : " (padding, written)");
  }
}

TEST(EmulatedSmallKernels, StridedCopyMovesAViewsElements) {
  check_strided_copy<uint8_t>(DType::b8);
  check_strided_copy<uint16_t>(DType::bf16);
  check_strided_copy<uint32_t>(DType::f32);
  check_strided_copy<uint64_t>(DType::i64);
}

// fill's value through the compute type, as the CPU's full converts it:
// rounding, overflow to infinity, NaN, and integers.
template <class T>
void check_fill(DType dt) {
  using C = cuda::compute_t<T>;
  for (double value : {0.1, -3.75, 1e6, -1e39, std::numeric_limits<double>::quiet_NaN()}) {
    if (!is_floating(dt) && (std::isnan(value) || std::abs(value) > 1e9)) continue;
    std::vector<T> got(700);
    launch_n(cuda::fill_kernel<T, C>, 700, got.data(), static_cast<C>(value));
    expect_cpu_bits(got, full({700}, value, dt), cat("fill ", dtype_name(dt), " with ", value));
  }
}

TEST(EmulatedSmallKernels, FillIsTheCpusFull) {
  check_fill<float>(DType::f32);
  check_fill<bf16>(DType::bf16);
  check_fill<f16>(DType::f16);
  check_fill<double>(DType::f64);
  check_fill<int32_t>(DType::i32);
  check_fill<int64_t>(DType::i64);
}

// To a compute-type buffer and back: the CPU's casts (f32 compute for the
// 16-bit types, f64 for f64), round to nearest even on the way down.
template <class T, class C>
void check_convert(DType dt, DType compute) {
  const Tensor x = spread_tensor(dt, {1000}, 5);
  const std::vector<T> in = host<T>(x);
  std::vector<C> widened(in.size());
  launch_n(cuda::to_compute_k<C, T>, int64_t(in.size()), in.data(), widened.data());
  expect_cpu_bits(widened, x.to(compute), cat(dtype_name(dt), " to ", dtype_name(compute)));
  const Tensor wide = spread_tensor(compute, {1000}, 6);  // values between dt's
  const std::vector<C> from = host<C>(wide);
  std::vector<T> narrowed(from.size());
  launch_n(cuda::from_compute_k<C, T>, int64_t(from.size()), from.data(), narrowed.data());
  expect_cpu_bits(narrowed, wide.to(dt), cat(dtype_name(compute), " to ", dtype_name(dt)));
}

TEST(EmulatedSmallKernels, ConversionsAreTheCpusCasts) {
  check_convert<bf16, float>(DType::bf16, DType::f32);
  check_convert<f16, float>(DType::f16, DType::f32);
  check_convert<float, float>(DType::f32, DType::f32);
  check_convert<double, double>(DType::f64, DType::f64);
  check_convert<bf16, double>(DType::bf16, DType::f64);
}

}  // namespace
}  // namespace kiln
