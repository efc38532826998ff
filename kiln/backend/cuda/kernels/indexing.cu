// Kernels of the indexing ops. Each index is checked on the device: a bad
// one is skipped and recorded (index_fault.h). Accumulating kernels give
// every output element to one thread, which adds its contributions in index
// order, rounding to the dtype after each add as the CPU kernels do, so the
// results are deterministic and equal the CPU's bits: no atomics.
//  - scatter_add scans the index line of its output element: O(axis length)
//    per element (the backward of gather, whose lines are short).
//  - index_add (also embedding's and index_select's backward) sorts the
//    indices once (cub's stable radix sort) and each output element adds
//    its own segment of the sorted order.
#include <cub/device/device_radix_sort.cuh>

#include <climits>

#include "kiln/backend/cuda/kernels/common.cuh"
#include "kiln/backend/cuda/kernels/index_fault.h"
#include "kiln/backend/cuda/layout.cuh"
#include "kiln/backend/cuda/scratch.h"

namespace kiln::cuda {
namespace {

// An i32 or i64 index tensor read as i64.
struct Index {
  const void* data;
  bool i32;
  __device__ long long operator[](long long k) const {
    return i32 ? static_cast<const int32_t*>(data)[k] : static_cast<const int64_t*>(data)[k];
  }
};
Index index_of(const TensorRef& t) { return {t.data, t.dtype == DType::i32}; }

// Where bad indices are reported, and as what.
struct Reporter {
  IndexFault* slot;
  int op, axis;
  long long size;
  __device__ bool ok(long long v) const { return v >= 0 && v < size; }
  __device__ void bad(long long v, long long position) const {
    if (atomicCAS(&slot->set, 0u, 1u) != 0u) return;
    slot->op = op;
    slot->axis = axis;
    slot->value = v;
    slot->position = position;
    slot->size = size;
  }
};
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

// out[p] = x[p with its axis coordinate replaced by index[p]]; `xl` is
// index's shape with x's strides.
template <class W>
__global__ void gather_k(W* out, const W* x, Index index, Layout xl, int axis, Reporter r,
                         long long n) {
  long long inner = 1;
  for (int d = xl.rank - 1; d > axis; --d) inner *= xl.shape[d];
  for (long long p = grid_start(); p < n; p += grid_step()) {
    const long long v = index[p], coord = p / inner % xl.shape[axis];
    if (!r.ok(v)) {
      r.bad(v, p);
      out[p] = 0;
      continue;
    }
    out[p] = x[offset_of(xl, p) + (v - coord) * xl.strides[axis]];
  }
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

// scatter_add's operands: x's shape, index's shape and strides, src's strides.
struct ScatterGeometry {
  int rank, axis;
  long long shape[kMaxRank], index_shape[kMaxRank], index_strides[kMaxRank],
      src_strides[kMaxRank];
};

// out[q] = x[q] + src[p] over the index positions p of q's line, in order,
// whose index equals q's axis coordinate.
template <class T>
__global__ void scatter_add_k(T* out, const T* x, Index index, const T* src, ScatterGeometry g,
                              Reporter r, long long n) {
  const int axis = g.axis;
  for (long long q = grid_start(); q < n; q += grid_step()) {
    long long rest = q, coord = 0, ibase = 0, sbase = 0;
    bool inside = true;
    for (int d = g.rank - 1; d >= 0; --d) {
      const long long c = rest % g.shape[d];
      rest /= g.shape[d];
      if (d == axis) {
        coord = c;
        continue;
      }
      inside = inside && c < g.index_shape[d];
      ibase += c * g.index_strides[d];
      sbase += c * g.src_strides[d];
    }
    compute_t<T> acc = widen(x[q]);
    for (long long i = 0; inside && i < g.index_shape[axis]; ++i) {
      const long long at = ibase + i * g.index_strides[axis], v = index[at];
      if (!r.ok(v)) {
        if (coord == 0) r.bad(v, at);  // one thread per line reports
      } else if (v == coord) {
        acc = round_to<T>(acc + widen(src[sbase + i * g.src_strides[axis]]));
      }
    }
    out[q] = narrow<T>(acc);
  }
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

// x viewed as [outer, size, inner] around `axis`.
struct AxisSplit {
  long long outer = 1, size = 1, inner = 1;
};
AxisSplit split_at(const Shape& shape, int axis) {
  AxisSplit s;
  for (int d = 0; d < shape.size(); ++d) {
    if (d < axis) s.outer *= shape[d];
    else if (d == axis) s.size = shape[d];
    else s.inner *= shape[d];
  }
  return s;
}

// out[o, j, c] = x[o, index[j], c], with x as [outer, size, inner].
template <class W>
__global__ void take_k(W* out, const W* x, Index index, long long m, long long inner, Reporter r,
                       long long n) {
  for (long long e = grid_start(); e < n; e += grid_step()) {
    const long long c = e % inner, j = e / inner % m, o = e / inner / m, v = index[j];
    if (!r.ok(v)) {
      if (o == 0 && c == 0) r.bad(v, j);
      out[e] = 0;
      continue;
    }
    out[e] = x[(o * r.size + v) * inner + c];
  }
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

// Sort keys (bad indices become `size`, after every valid one) and the
// positions they sort.
__global__ void index_keys_k(Index index, Reporter r, unsigned long long* keys, long long* order,
                             long long m) {
  for (long long j = grid_start(); j < m; j += grid_step()) {
    const long long v = index[j];
    if (!r.ok(v)) r.bad(v, j);
    keys[j] = r.ok(v) ? (unsigned long long)v : (unsigned long long)r.size;
    order[j] = j;
  }
}

// The first position of sorted[0, m) whose key is not below k (with
// `after`: above k).
__device__ long long bound(const unsigned long long* sorted, long long m, unsigned long long k,
                           bool after) {
  long long lo = 0, hi = m;
  while (lo < hi) {
    const long long mid = lo + (hi - lo) / 2;
    if (sorted[mid] < k || (after && sorted[mid] == k)) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// out[o, k, c] = x[o, k, c] + src[o, j, c] over the positions j with
// index[j] == k, in order of j (the stable sort keeps it).
template <class T>
__global__ void index_add_k(T* out, const T* x, const T* src, const unsigned long long* keys,
                            const long long* order, long long size, long long m, long long inner,
                            long long n) {
  for (long long e = grid_start(); e < n; e += grid_step()) {
    const long long c = e % inner, k = e / inner % size, o = e / inner / size;
    compute_t<T> acc = widen(x[e]);
    const long long end = bound(keys, m, k, true);
    for (long long t = bound(keys, m, k, false); t < end; ++t)
      acc = round_to<T>(acc + widen(src[(o * m + order[t]) * inner + c]));
    out[e] = narrow<T>(acc);
  }
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
  char* base = static_cast<char*>(scratch(4 * keys + aligned(temp)));
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

template <class T>
__global__ void one_hot_k(T* out, Index index, Reporter r, long long n) {
  for (long long e = grid_start(); e < n; e += grid_step()) {
    const long long k = e / r.size, cls = e % r.size, v = index[k];
    if (!r.ok(v) && cls == 0) r.bad(v, k);
    out[e] = narrow<T>(int(v == cls));
  }
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
