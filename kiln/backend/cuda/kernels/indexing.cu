// The indexing ops on CUDA: the launches of indexing.cuh's kernels.
//  - scatter_add scans the index line of its output element: O(axis length)
//    per element (the backward of gather, whose lines are short).
//  - index_add (also embedding's and index_select's backward) sorts the
//    indices once (cub's stable radix sort) and each output element adds
//    its own segment of the sorted order.
#include <cub/device/device_radix_sort.cuh>

#include <climits>

#include "kiln/backend/cuda/kernels/indexing.cuh"
#include "kiln/backend/cuda/scratch.h"
#include "kiln/runtime/kernel_layout.h"

namespace kiln::cuda {
namespace {

using namespace indexing;

Index index_of(const TensorRef& t) { return {t.data, t.dtype == DType::i32}; }

Reporter reporter(IndexOp op, int axis, long long size) {
  return {index_fault_slot(), int(op), axis, size};
}

// Calls f(W{}) with W an unsigned word of the dtype's size: moving
// elements never converts them.
template <class F>
void visit_word(DType t, F&& f) {
  switch (itemsize(t)) {
    case 1: return f(uint8_t{});
    case 2: return f(uint16_t{});
    case 4: return f(uint32_t{});
    case 8: return f(uint64_t{});
  }
  fail("CUDA indexing kernel: no element word for ", dtype_name(t));
}

// Adding ops reject bool (their shape rules do too).
template <class F>
void visit_addable(DType t, const char* op, F&& f) {
  KILN_CHECK(t != DType::b8, op, " (CUDA): bool tensors cannot be added");
  visit_dtype(t, [&](auto tag) {
    if constexpr (!std::is_same_v<decltype(tag), bool>) f(tag);
  });
}

void gather_kernel(const KernelArgs& a) {
  const TensorRef &x = a.in[0], &index = a.in[1];
  int axis = normalize_axis(a.attrs.i("axis"), x.rank(), "gather");
  Layout xl = layout_of(index.shape, x.strides);
  Reporter r = reporter(IndexOp::gather, axis, x.shape[axis]);
  visit_word(x.dtype, [&](auto tag) {
    using W = decltype(tag);
    launch_n(gather_k<W>, index.numel(), a.out[0].ptr<W>(), x.ptr<const W>(), index_of(index), xl,
             axis, r);
  });
}

void scatter_add_kernel(const KernelArgs& a) {
  const TensorRef &x = a.in[0], &index = a.in[1], &src = a.in[2];
  ScatterGeometry g{};
  g.rank = x.rank();
  g.axis = normalize_axis(a.attrs.i("axis"), x.rank(), "scatter_add");
  for (int d = 0; d < g.rank; ++d) {
    g.shape[d] = x.shape[d];
    g.index_shape[d] = index.shape[d];
    g.index_strides[d] = index.strides[d];
    g.src_strides[d] = src.strides[d];
  }
  Reporter r = reporter(IndexOp::scatter_add, g.axis, x.shape[g.axis]);
  visit_addable(x.dtype, "scatter_add", [&](auto tag) {
    using T = decltype(tag);
    launch_n(scatter_add_k<T>, x.numel(), a.out[0].ptr<T>(), x.ptr<const T>(), index_of(index),
             src.ptr<const T>(), g, r);
  });
}

void take(const KernelArgs& a, int axis, Reporter r) {
  const TensorRef &x = a.in[0], &index = a.in[1];
  AxisSplit s = split_at(x.shape, axis);
  visit_word(x.dtype, [&](auto tag) {
    using W = decltype(tag);
    launch_n(take_k<W>, a.out[0].numel(), a.out[0].ptr<W>(), x.ptr<const W>(), index_of(index),
             index.numel(), s.inner, r);
  });
}

void index_select_kernel(const KernelArgs& a) {
  int axis = normalize_axis(a.attrs.i("axis"), a.in[0].rank(), "index_select");
  take(a, axis, reporter(IndexOp::index_select, axis, a.in[0].shape[axis]));
}

void embedding_kernel(const KernelArgs& a) {
  take(a, 0, reporter(IndexOp::embedding, -1, a.in[0].shape[0]));
}

size_t aligned(size_t bytes) { return (bytes + 255) / 256 * 256; }

void index_add_kernel(const KernelArgs& a) {
  const TensorRef &x = a.in[0], &index = a.in[1], &src = a.in[2];
  const int axis = normalize_axis(a.attrs.i("axis"), x.rank(), "index_add");
  const AxisSplit s = split_at(x.shape, axis);
  const long long m = index.numel();
  KILN_CHECK(m <= INT_MAX, "index_add (CUDA): ", m, " indices are more than the sort takes (",
             INT_MAX, ")");
  int bits = 1;  // keys are at most s.size
  while (bits < 64 && (1ull << bits) <= (unsigned long long)s.size) ++bits;
  const cudaStream_t stream = current_stream();
  const size_t keys = aligned(size_t(std::max(m, 1LL)) * 8);
  size_t temp = 0;
  KILN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      nullptr, temp, (const unsigned long long*)nullptr, (unsigned long long*)nullptr,
      (const long long*)nullptr, (long long*)nullptr, int(m), 0, bits, stream));
  const Scratch scratch(4 * keys + aligned(temp));
  char* base = scratch.as();
  auto* keys_in = reinterpret_cast<unsigned long long*>(base);
  auto* keys_out = reinterpret_cast<unsigned long long*>(base + keys);
  auto* order_in = reinterpret_cast<long long*>(base + 2 * keys);
  auto* order_out = reinterpret_cast<long long*>(base + 3 * keys);
  if (m > 0) {
    launch_n(index_keys_k, m, index_of(index), reporter(IndexOp::index_add, axis, s.size),
             keys_in, order_in);
    KILN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(base + 4 * keys, temp, keys_in, keys_out,
                                                    order_in, order_out, int(m), 0, bits, stream));
  }
  visit_addable(x.dtype, "index_add", [&](auto tag) {
    using T = decltype(tag);
    launch_n(index_add_k<T>, x.numel(), a.out[0].ptr<T>(), x.ptr<const T>(), src.ptr<const T>(),
             keys_out, order_out, s.size, m, s.inner);
  });
}

void one_hot_kernel(const KernelArgs& a) {
  const TensorRef& out = a.out[0];
  Reporter r = reporter(IndexOp::one_hot, -1, a.attrs.i("num_classes"));
  visit_dtype(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    launch_n(one_hot_k<T>, out.numel(), out.ptr<T>(), index_of(a.in[0]), r);
  });
}

const KernelRegistrar registrations[] = {
    {DeviceKind::cuda, "gather", {gather_kernel, false}},
    {DeviceKind::cuda, "scatter_add", {scatter_add_kernel, false}},
    {DeviceKind::cuda, "index_select", {index_select_kernel, false}},
    {DeviceKind::cuda, "index_add", {index_add_kernel, false}},
    {DeviceKind::cuda, "embedding", {embedding_kernel, false}},
    {DeviceKind::cuda, "one_hot", {one_hot_kernel, false}},
};

}  // namespace
}  // namespace kiln::cuda
