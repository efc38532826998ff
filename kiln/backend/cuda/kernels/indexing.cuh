// The kernels of the indexing ops (launched by indexing.cu). Each index is
// checked on the device: a bad one is skipped and recorded (index_fault.h).
// Accumulating kernels give every output element to one thread, which adds
// its contributions in index order, rounding to the dtype after each add as
// the CPU kernels do, so the results are deterministic and equal the CPU's
// bits: no atomics.
#pragma once
#include "kiln/backend/cuda/kernels/common.cuh"
#include "kiln/backend/cuda/kernels/index_fault.h"
#include "kiln/backend/cuda/layout.cuh"

namespace kiln::cuda::indexing {

// An i32 or i64 index tensor read as i64.
struct Index {
  const void* data;
  bool i32;
  __device__ long long operator[](long long k) const {
    return i32 ? static_cast<const int32_t*>(data)[k] : static_cast<const int64_t*>(data)[k];
  }
};
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

// Sort keys (bad indices become `size`, after every valid one) and the
// positions they sort.
static __global__ void index_keys_k(Index index, Reporter r, unsigned long long* keys, long long* order,
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
__device__ inline long long bound(const unsigned long long* sorted, long long m, unsigned long long k,
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

template <class T>
__global__ void one_hot_k(T* out, Index index, Reporter r, long long n) {
  for (long long e = grid_start(); e < n; e += grid_step()) {
    const long long k = e / r.size, cls = e % r.size, v = index[k];
    if (!r.ok(v) && cls == 0) r.bad(v, k);
    out[e] = narrow<T>(int(v == cls));
  }
}

}  // namespace kiln::cuda::indexing
