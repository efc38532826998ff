// CUDA's indexing kernels (kiln/backend/cuda/kernels/indexing.cuh) run on
// the CPU (tests/backend/cuda/emulated.h) with indexing.cu's launches,
// against the CPU's kernels: gather and scatter_add along a middle axis,
// embedding (take) and its backward index_add over repeated ids, one_hot.
// Moves are the CPU's bits, and so are the accumulating kernels' sums (one
// thread per output element, adding in index order, rounding after each
// add). index_add's stable sort is cub's on the GPU; here std::stable_sort
// sorts the keys the kernel makes. A bad index is recorded (the first one
// met), its element skipped.
#include "tests/backend/cuda/emulated.h"  // first: the kernels compile for the host

#include "kiln/backend/cuda/kernels/indexing.cuh"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <type_traits>
#include <vector>

#include "kiln/runtime/dispatch.h"
#include "kiln/runtime/kernel_layout.h"
#include "kiln/runtime/tensor.h"
#include "tests/backend/cuda/emulated_checks.h"
#include "tests/support/spread_values.h"

namespace kiln {
namespace {

namespace emulated = cuda::emulated;
using namespace cuda::indexing;
using cuda::IndexFault;
using cuda::IndexOp;
using test::element_bytes;
using test::expect_cpu_bits;
using test::host;
using test::launch_n;
using test::spread_tensor;

// The unsigned word indexing.cu moves elements of T as (its visit_word).
template <class T>
using word_t = std::conditional_t<sizeof(T) == 1, uint8_t,
                                  std::conditional_t<sizeof(T) == 2, uint16_t,
                                                     std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>>;

template <class T>
const word_t<T>* words(const std::vector<T>& v) {
  return reinterpret_cast<const word_t<T>*>(v.data());
}
template <class T>
word_t<T>* words(std::vector<T>& v) {
  return reinterpret_cast<word_t<T>*>(v.data());
}

const ir::OpDef& op(const char* name) { return ir::get_op(name); }

Tensor on_cpu(const char* name, const std::vector<Tensor>& in, const ir::Attrs& attrs = {}) {
  return apply(op(name), in, attrs, kCPU)[0];
}

// Indices in [0, size), each one `size` apart from a neighbour's (repeats).
Tensor indices(const Shape& shape, long long size, DType t) {
  std::vector<int64_t> v(size_t(shape.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = int64_t((i * 5 + i / 3) % size_t(size));
  return from_vector(v, shape).to(t);
}

Index index_arg(const std::vector<uint8_t>& bytes, DType t) { return {bytes.data(), t == DType::i32}; }

template <class T>
void check_gather_scatter(DType dt, DType it) {
  const std::string what = cat(dtype_name(dt), " indexed by ", dtype_name(it));
  const Shape xs{5, 7, 3}, is{5, 4, 3};
  const Tensor x = spread_tensor(dt, xs, 1), index = indices(is, 7, it), src = spread_tensor(dt, is, 2);
  const std::vector<T> hx = host<T>(x), hsrc = host<T>(src);
  const std::vector<uint8_t> hi = element_bytes(index);
  IndexFault fault{};
  const Reporter r{&fault, int(IndexOp::gather), 1, 7};

  std::vector<T> gathered(static_cast<size_t>(is.numel()));
  launch_n(gather_k<word_t<T>>, is.numel(), words(gathered), words(hx), index_arg(hi, it),
           cuda::layout_of(is, contiguous_strides(xs)), 1, r);
  expect_cpu_bits(gathered, on_cpu("gather", {x, index}, {{"axis", int64_t{1}}}), "gather " + what);

  ScatterGeometry g{};
  g.rank = 3;
  g.axis = 1;
  const Strides ist = contiguous_strides(is);
  for (int d = 0; d < 3; ++d) {
    g.shape[d] = xs[d];
    g.index_shape[d] = is[d];
    g.index_strides[d] = ist[d];
    g.src_strides[d] = ist[d];
  }
  std::vector<T> scattered(hx.size());
  launch_n(scatter_add_k<T>, xs.numel(), scattered.data(), hx.data(), index_arg(hi, it), hsrc.data(), g, r);
  expect_cpu_bits(scattered, on_cpu("scatter_add", {x, index, src}, {{"axis", int64_t{1}}}), "scatter_add " + what);
  EXPECT_EQ(fault.set, 0u) << what;
}

TEST(EmulatedIndexing, GatherAndScatterAddAreTheCpus) {
  check_gather_scatter<float>(DType::f32, DType::i64);
  check_gather_scatter<bf16>(DType::bf16, DType::i32);
  check_gather_scatter<int64_t>(DType::i64, DType::i64);
}

// embedding's forward (take) and backward (index_add over sorted keys).
template <class T>
void check_embedding(DType dt, DType it) {
  const std::string what = cat(dtype_name(dt), " indexed by ", dtype_name(it));
  const long long vocab = 11, dim = 6, m = 40;
  const Tensor w = spread_tensor(dt, {vocab, dim}, 3), ids = indices({m}, vocab, it);
  const Tensor grad = spread_tensor(dt, {m, dim}, 4), zeros_w = zeros({vocab, dim}, dt);
  const std::vector<T> hw = host<T>(w), hgrad = host<T>(grad), hzero = host<T>(zeros_w);
  const std::vector<uint8_t> hi = element_bytes(ids);
  IndexFault fault{};
  const Reporter r{&fault, int(IndexOp::embedding), -1, vocab};
  const AxisSplit s = split_at(w.shape(), 0);

  std::vector<T> rows(static_cast<size_t>(m * dim));
  launch_n(take_k<word_t<T>>, m * dim, words(rows), words(hw), index_arg(hi, it), m, s.inner, r);
  expect_cpu_bits(rows, on_cpu("embedding", {w, ids}), "embedding " + what);

  std::vector<unsigned long long> keys(static_cast<size_t>(m));
  std::vector<long long> order(static_cast<size_t>(m));
  launch_n(index_keys_k, m, index_arg(hi, it), r, keys.data(), order.data());
  std::stable_sort(order.begin(), order.end(), [&](long long a, long long b) { return keys[a] < keys[b]; });
  std::vector<unsigned long long> sorted;
  for (long long j : order) sorted.push_back(keys[size_t(j)]);
  std::vector<T> dw(hw.size());
  launch_n(index_add_k<T>, vocab * dim, dw.data(), hzero.data(), hgrad.data(), sorted.data(), order.data(), s.size, m,
           s.inner);
  expect_cpu_bits(dw, on_cpu("index_add", {zeros_w, ids, grad}, {{"axis", int64_t{0}}}), "index_add " + what);
  EXPECT_EQ(fault.set, 0u) << what;
}

TEST(EmulatedIndexing, EmbeddingAndItsBackwardAreTheCpus) {
  check_embedding<float>(DType::f32, DType::i32);
  check_embedding<bf16>(DType::bf16, DType::i64);
  check_embedding<f16>(DType::f16, DType::i32);
}

TEST(EmulatedIndexing, OneHotIsTheCpus) {
  const long long m = 30, classes = 9;
  const Tensor ids = indices({m}, classes, DType::i64);
  const std::vector<uint8_t> hi = element_bytes(ids);
  IndexFault fault{};
  const Reporter r{&fault, int(IndexOp::one_hot), -1, classes};
  std::vector<float> out(static_cast<size_t>(m * classes));
  launch_n(one_hot_k<float>, m * classes, out.data(), index_arg(hi, DType::i64), r);
  expect_cpu_bits(out, on_cpu("one_hot", {ids}, {{"num_classes", classes}}), "one_hot");
}

TEST(EmulatedIndexing, ABadIndexIsRecordedAndSkipped) {
  const long long vocab = 11, dim = 4;
  const Tensor w = spread_tensor(DType::f32, {vocab, dim}, 5);
  const std::vector<float> hw = w.to_vector<float>();
  const std::vector<int32_t> ids{3, 12, 0, -1};  // 12 and -1 are out of range; 12 comes first
  IndexFault fault{};
  const Reporter r{&fault, int(IndexOp::embedding), -1, vocab};
  std::vector<float> rows(ids.size() * size_t(dim), 7.0f);
  launch_n(take_k<uint32_t>, (long long)rows.size(), words(rows), words(hw), Index{ids.data(), true},
           (long long)ids.size(), dim, r);
  ASSERT_EQ(fault.set, 1u);
  EXPECT_EQ(fault.op, int(IndexOp::embedding));
  EXPECT_EQ(fault.size, vocab);
  // One of the bad ones (the threads race to record; either is the first met).
  EXPECT_TRUE((fault.value == 12 && fault.position == 1) || (fault.value == -1 && fault.position == 3))
      << fault.value << " at " << fault.position;
  for (long long c = 0; c < dim; ++c) {
    EXPECT_EQ(rows[size_t(dim + c)], 0.0f) << "a bad row reads as zeros";
    EXPECT_EQ(rows[size_t(c)], hw[size_t(3 * dim + c)]);
  }
}

}  // namespace
}  // namespace kiln
