// The flash attention kernels on CUDA (launched by flash_attention.cu),
// with the CPU kernel's structure (kiln/backend/cpu/flash_attention.cc): a
// thread block owns a tile of queries and walks the key tiles with an
// online softmax, so no q_len x kv_len scores exist; the backward
// recomputes the probabilities from the saved log-sum-exp in two kernels,
// one block per key tile (dK, dV over its query heads and tiles) and one
// per query tile (dQ). Every gradient element is summed by one thread in a
// fixed order: no atomics, the same bits on every run. Tiles the causal
// mask or the window rule out are skipped before they are loaded, and
// tiles no document pair shares before the products.
//
// Tiles sit in shared memory in the compute type (f32 for 16-bit floats,
// f64 for f64) and the products are scalar FMAs. The query tile is 64 rows
// where shared memory allows (32 or 16 otherwise), the key tile 32 keys.
#pragma once
#include <cmath>

#include "kiln/backend/cuda/kernels/common.cuh"
#include "kiln/codegen/math.h"

namespace kiln::cuda::flash {

namespace math = codegen::math;

constexpr int kThreads = 256;
constexpr int kTileK = 32;          // keys per tile
constexpr int kMaxHeadDim = 256;    // head_dim and v_dim
constexpr int kKeyLanes = kThreads / kTileK;  // threads per key row (dK, dV)

struct Dims {
  long long batch, q_heads, kv_heads, q_len, kv_len, head_dim, v_dim;
  long long offset;  // query i sits at key position i + offset
  bool causal;
  long long window;
  __host__ __device__ long long group() const { return q_heads / kv_heads; }
};

// Document ids [batch, seq] (i32 or i64), or none.
struct DocIds {
  const void* ids = nullptr;
  bool wide = false;
  __device__ long long at(long long i) const {
    return wide ? static_cast<const long long*>(ids)[i] : static_cast<const int*>(ids)[i];
  }
};

// The shared-memory tiles of a block, carved from one buffer: document ids
// first (8-byte aligned), then the compute-type tiles. Rows are padded by
// one element, so the threads of a warp read distinct banks. The forward
// uses q, k, v and p; the backward also dout, ds, lse and delta.
template <class C>
struct Tiles {
  long long *qdoc, *kdoc;
  C *q, *k, *v, *p, *dout, *ds, *lse, *delta;
  long long ldq, ldv, ldp;

  // Lays the tiles out from `base` (nullptr: only sizes them); returns the bytes.
  __host__ __device__ static size_t carve(Tiles& t, unsigned char* base, int rows, long long d,
                                          long long dv, bool backward) {
    size_t at = 0;
    auto take = [&](size_t n, size_t size) {
      unsigned char* p = base ? base + at : nullptr;
      at += n * size;
      return p;
    };
    t.ldq = d + 1;
    t.ldv = dv + 1;
    t.ldp = kTileK + 1;
    t.qdoc = reinterpret_cast<long long*>(take(rows, 8));
    t.kdoc = reinterpret_cast<long long*>(take(kTileK, 8));
    t.q = reinterpret_cast<C*>(take(size_t(rows * t.ldq), sizeof(C)));
    t.k = reinterpret_cast<C*>(take(size_t(kTileK * t.ldq), sizeof(C)));
    t.v = reinterpret_cast<C*>(take(size_t(kTileK * t.ldv), sizeof(C)));
    t.p = reinterpret_cast<C*>(take(size_t(rows * t.ldp), sizeof(C)));
    t.dout = t.ds = t.lse = t.delta = nullptr;
    if (backward) {
      t.dout = reinterpret_cast<C*>(take(size_t(rows * t.ldv), sizeof(C)));
      t.ds = reinterpret_cast<C*>(take(size_t(rows * t.ldp), sizeof(C)));
      t.lse = reinterpret_cast<C*>(take(rows, sizeof(C)));
      t.delta = reinterpret_cast<C*>(take(rows, sizeof(C)));
    }
    return at;
  }
};

template <class C>
__device__ Tiles<C> shared_tiles(int rows, const Dims& d, bool backward) {
  Tiles<C> t;
  Tiles<C>::carve(t, dynamic_shared(), rows, d.head_dim, d.v_dim, backward);
  return t;
}

// dst[r][c] = src row first + r (zeros past `valid` rows), `rows` rows of
// `width` elements, widened to the compute type.
template <class T, class C>
__device__ void load_rows(C* dst, long long ld, const T* src, long long first, long long valid,
                          int rows, long long width) {
  for (long long e = threadIdx.x; e < rows * width; e += kThreads) {
    const long long r = e / width, c = e % width;
    dst[r * ld + c] = first + r < valid ? widen(src[(first + r) * width + c]) : C(0);
  }
}

template <class C>
__device__ void load_values(C* dst, const C* src, long long first, long long valid, int rows) {
  for (int r = threadIdx.x; r < rows; r += kThreads) dst[r] = first + r < valid ? src[first + r] : C(0);
}

// The document ids of positions [first, first + rows) of batch row b; -1 past the end.
inline __device__ void load_docs(long long* dst, const DocIds& doc, const Dims& d, long long b,
                          long long first, int rows) {
  for (int r = threadIdx.x; r < rows; r += kThreads)
    dst[r] = first + r < d.q_len ? doc.at(b * d.q_len + first + r) : -1;
}

// Whether some query of [i0, i1) may see some key of [j0, j1) by position
// (documents aside).
inline __device__ bool tile_visible(const Dims& d, long long i0, long long i1, long long j0, long long j1) {
  if (!d.causal) return true;
  const long long first = i0 + d.offset, last = i1 - 1 + d.offset;
  if (j0 > last) return false;
  return d.window == 0 || j1 - 1 > first - d.window;
}

// Whether query i (tile row r) may see key j (tile column c); qdoc and
// kdoc are the tiles' document ids, or null without documents.
inline __device__ bool allowed(const Dims& d, const long long* qdoc, const long long* kdoc,
                               long long i, long long j, int r, int c) {
  if (i >= d.q_len || j >= d.kv_len) return false;
  if (d.causal) {
    const long long pos = i + d.offset;
    if (j > pos || (d.window > 0 && j <= pos - d.window)) return false;
  }
  return !qdoc || qdoc[r] == kdoc[c];
}

template <class C>
__device__ bool allowed(const Dims& d, const Tiles<C>& t, bool docs, long long i, long long j,
                        int r, int c) {
  return allowed(d, docs ? t.qdoc : nullptr, t.kdoc, i, j, r, c);
}

template <class C>
__device__ C larger(C x, C y) {
  return x < y ? y : x;
}

// The threads of one query row: kThreads / Rows consecutive lanes of a warp.
template <int Rows>
struct RowLanes {
  static constexpr int kLanes = kThreads / Rows;
  static constexpr int kEntries = kTileK / kLanes;     // scores per thread per tile
  static constexpr int kColumns = kMaxHeadDim / kLanes;  // output columns per thread
  int row, lane;
  __device__ RowLanes() : row(threadIdx.x / kLanes), lane(threadIdx.x % kLanes) {}
  __device__ int key(int e) const { return lane + kLanes * e; }
  __device__ int column(int e) const { return lane + kLanes * e; }

  template <class C>
  __device__ static C max(C x) {
    for (int off = kLanes / 2; off > 0; off /= 2) x = larger(x, __shfl_xor_sync(0xffffffffu, x, off));
    return x;
  }
  template <class C>
  __device__ static C sum(C x) {
    for (int off = kLanes / 2; off > 0; off /= 2) x += __shfl_xor_sync(0xffffffffu, x, off);
    return x;
  }
};

// Whether this thread's (query, key) pairs of the tile include an allowed one.
template <int Rows, class C>
__device__ bool sees_any(const Dims& d, const Tiles<C>& t, bool docs, long long i0, long long j0) {
  const RowLanes<Rows> L;
  bool any = false;
  for (int e = 0; e < L.kEntries; ++e)
    any = any || allowed(d, t, docs, i0 + L.row, j0 + L.key(e), L.row, L.key(e));
  return any;
}

// acc[e] = sum over x < n of a[row][x] * b[key(e)][x], for this thread's row
// of a (leading dimension lda) and keys of b (ldb).
template <int Rows, class C>
__device__ void row_dots(C (&acc)[RowLanes<Rows>::kEntries], const C* a, long long lda,
                         const C* b, long long ldb, long long n) {
  const RowLanes<Rows> L;
#pragma unroll
  for (int e = 0; e < L.kEntries; ++e) acc[e] = 0;
  const C* ar = a + L.row * lda;
  for (long long x = 0; x < n; ++x) {
    const C ax = ar[x];
#pragma unroll
    for (int e = 0; e < L.kEntries; ++e) acc[e] = math::fma(ax, b[L.key(e) * ldb + x], acc[e]);
  }
}

template <class T, int Rows>
__global__ void __launch_bounds__(kThreads)
    flash_forward_k(const T* q, const T* k, const T* v, DocIds doc, T* out, compute_t<T>* lse,
                    Dims d, compute_t<T> scale) {
  using C = compute_t<T>;
  using L = RowLanes<Rows>;
  const Tiles<C> t = shared_tiles<C>(Rows, d, false);
  const L lanes;
  const bool docs = doc.ids != nullptr;
  const long long D = d.head_dim, Dv = d.v_dim;
  const long long q_tiles = (d.q_len + Rows - 1) / Rows;
  const long long bh = blockIdx.x / q_tiles, b = bh / d.q_heads, h = bh % d.q_heads;
  const long long kv = b * d.kv_heads + h / d.group();
  const long long i0 = blockIdx.x % q_tiles * Rows, i1 = min(i0 + Rows, d.q_len);
  const long long i = i0 + lanes.row;
  const C ninf = -C(INFINITY);

  load_rows(t.q, t.ldq, q + bh * d.q_len * D, i0, d.q_len, Rows, D);
  if (docs) load_docs(t.qdoc, doc, d, b, i0, Rows);
  C o[L::kColumns];
#pragma unroll
  for (int e = 0; e < L::kColumns; ++e) o[e] = 0;
  C m = ninf, l = 0;

  for (long long j0 = 0; j0 < d.kv_len; j0 += kTileK) {
    const long long j1 = min(j0 + kTileK, d.kv_len);
    if (!tile_visible(d, i0, i1, j0, j1)) continue;
    __syncthreads();  // the previous tile's readers are done
    if (docs) {
      load_docs(t.kdoc, doc, d, b, j0, kTileK);
      __syncthreads();
      if (!__syncthreads_or(sees_any<Rows>(d, t, docs, i0, j0))) continue;
    }
    load_rows(t.k, t.ldq, k + kv * d.kv_len * D, j0, d.kv_len, kTileK, D);
    load_rows(t.v, t.ldv, v + kv * d.kv_len * Dv, j0, d.kv_len, kTileK, Dv);
    __syncthreads();

    C s[L::kEntries];
    row_dots<Rows>(s, t.q, t.ldq, t.k, t.ldq, D);
    C mx = ninf;
#pragma unroll
    for (int e = 0; e < L::kEntries; ++e) {
      s[e] = allowed(d, t, docs, i, j0 + lanes.key(e), lanes.row, lanes.key(e)) ? s[e] * scale : ninf;
      mx = larger(mx, s[e]);
    }
    mx = L::max(mx);
    // Every lane takes part in the shuffles, whether or not its row sees
    // anything in this tile.
    const bool none = mx == ninf;
    const C mn = none ? m : larger(m, mx);
    C sum = 0;
#pragma unroll
    for (int e = 0; e < L::kEntries; ++e) {
      s[e] = none ? C(0) : math::exp(s[e] - mn);  // exp(-inf) = 0 where masked
      sum += s[e];
    }
    sum = L::sum(sum);
    if (!none) {
      const C corr = math::exp(m - mn);  // 0 on the row's first visible tile
      l = l * corr + sum;
      m = mn;
#pragma unroll
      for (int e = 0; e < L::kColumns; ++e) o[e] *= corr;
    }
#pragma unroll
    for (int e = 0; e < L::kEntries; ++e) t.p[lanes.row * t.ldp + lanes.key(e)] = s[e];
    __syncthreads();
    for (int c = 0; c < j1 - j0; ++c) {
      const C pc = t.p[lanes.row * t.ldp + c];
      const C* vr = t.v + c * t.ldv;
#pragma unroll
      for (int e = 0; e < L::kColumns; ++e)
        if (lanes.column(e) < Dv) o[e] = math::fma(pc, vr[lanes.column(e)], o[e]);
    }
  }
  if (i >= d.q_len) return;
  const C inv = l > 0 ? C(1) / l : C(0);
  T* orow = out + (bh * d.q_len + i) * Dv;
#pragma unroll
  for (int e = 0; e < L::kColumns; ++e)
    if (lanes.column(e) < Dv) orow[lanes.column(e)] = narrow<T>(o[e] * inv);
  if (lanes.lane == 0) lse[bh * d.q_len + i] = m + math::log(l);
}

// The backward's shared step for the query tile at i0 and the key tile at
// j0 (both loaded): P = exp(scale * q k^T - lse) and dS = P * (dout v^T -
// delta) into t.p and t.ds, zero where masked.
template <int Rows, class C>
__device__ void probabilities_and_grads(const Dims& d, const Tiles<C>& t, bool docs, C scale,
                                        long long i0, long long j0) {
  using L = RowLanes<Rows>;
  const L lanes;
  C s[L::kEntries], dp[L::kEntries];
  row_dots<Rows>(s, t.q, t.ldq, t.k, t.ldq, d.head_dim);
  row_dots<Rows>(dp, t.dout, t.ldv, t.v, t.ldv, d.v_dim);
  const C lse = t.lse[lanes.row], delta = t.delta[lanes.row];
#pragma unroll
  for (int e = 0; e < L::kEntries; ++e) {
    const int c = lanes.key(e);
    const bool ok = allowed(d, t, docs, i0 + lanes.row, j0 + c, lanes.row, c);
    const C p = ok ? math::exp(s[e] * scale - lse) : C(0);
    t.p[lanes.row * t.ldp + c] = p;
    t.ds[lanes.row * t.ldp + c] = ok ? p * (dp[e] - delta) : C(0);
  }
}

struct BackwardArgs {
  const void *q, *k, *v, *dout, *lse, *delta;
  DocIds doc;
  void *dq, *dk, *dv;
};

// Loads query tile i0 of head bh: q, dout, lse, delta (and its documents).
template <class T, int Rows, class C>
__device__ void load_query_tile(const Tiles<C>& t, const BackwardArgs& a, const Dims& d,
                                long long bh, long long i0) {
  const long long row0 = bh * d.q_len;
  load_rows(t.q, t.ldq, static_cast<const T*>(a.q) + row0 * d.head_dim, i0, d.q_len, Rows,
            d.head_dim);
  load_rows(t.dout, t.ldv, static_cast<const T*>(a.dout) + row0 * d.v_dim, i0, d.q_len, Rows,
            d.v_dim);
  load_values(t.lse, static_cast<const C*>(a.lse) + row0, i0, d.q_len, Rows);
  load_values(t.delta, static_cast<const C*>(a.delta) + row0, i0, d.q_len, Rows);
}

template <class T, class C>
__device__ void load_key_tile(const Tiles<C>& t, const BackwardArgs& a, const Dims& d,
                              long long kv, long long j0) {
  load_rows(t.k, t.ldq, static_cast<const T*>(a.k) + kv * d.kv_len * d.head_dim, j0, d.kv_len,
            kTileK, d.head_dim);
  load_rows(t.v, t.ldv, static_cast<const T*>(a.v) + kv * d.kv_len * d.v_dim, j0, d.kv_len,
            kTileK, d.v_dim);
}

// dK and dV of one key tile: a block per (batch, kv head, key tile), over
// the group's query heads and every query tile that sees it.
template <class T, int Rows>
__global__ void __launch_bounds__(kThreads) flash_backward_kv_k(BackwardArgs a, Dims d,
                                                                compute_t<T> scale) {
  using C = compute_t<T>;
  constexpr int kColumns = kMaxHeadDim / kKeyLanes;
  const Tiles<C> t = shared_tiles<C>(Rows, d, true);
  const bool docs = a.doc.ids != nullptr;
  const long long k_tiles = (d.kv_len + kTileK - 1) / kTileK;
  const long long kv = blockIdx.x / k_tiles, b = kv / d.kv_heads;
  const long long j0 = blockIdx.x % k_tiles * kTileK, j1 = min(j0 + kTileK, d.kv_len);
  const int c = threadIdx.x / kKeyLanes, lane = threadIdx.x % kKeyLanes;

  load_key_tile<T>(t, a, d, kv, j0);
  if (docs) load_docs(t.kdoc, a.doc, d, b, j0, kTileK);
  C dk[kColumns], dv[kColumns];
#pragma unroll
  for (int e = 0; e < kColumns; ++e) dk[e] = dv[e] = 0;

  const long long G = d.group();
  for (long long h = kv % d.kv_heads * G; h < (kv % d.kv_heads + 1) * G; ++h) {
    const long long bh = b * d.q_heads + h;
    for (long long i0 = 0; i0 < d.q_len; i0 += Rows) {
      const long long i1 = min(i0 + Rows, d.q_len);
      if (!tile_visible(d, i0, i1, j0, j1)) continue;
      __syncthreads();  // the previous tile's readers are done
      if (docs) {
        load_docs(t.qdoc, a.doc, d, b, i0, Rows);
        __syncthreads();
        if (!__syncthreads_or(sees_any<Rows>(d, t, docs, i0, j0))) continue;
      }
      load_query_tile<T, Rows>(t, a, d, bh, i0);
      __syncthreads();
      probabilities_and_grads<Rows>(d, t, docs, scale, i0, j0);
      __syncthreads();
      for (long long r = 0; r < i1 - i0; ++r) {
        const C p = t.p[r * t.ldp + c], ds = t.ds[r * t.ldp + c];
        const C *dor = t.dout + r * t.ldv, *qr = t.q + r * t.ldq;
#pragma unroll
        for (int e = 0; e < kColumns; ++e) {
          const long long col = lane + kKeyLanes * e;
          if (col < d.v_dim) dv[e] = math::fma(p, dor[col], dv[e]);
          if (col < d.head_dim) dk[e] = math::fma(ds, qr[col], dk[e]);
        }
      }
    }
  }
  const long long j = j0 + c;
  if (j >= d.kv_len) return;
  T* dkr = static_cast<T*>(a.dk) + (kv * d.kv_len + j) * d.head_dim;
  T* dvr = static_cast<T*>(a.dv) + (kv * d.kv_len + j) * d.v_dim;
#pragma unroll
  for (int e = 0; e < kColumns; ++e) {
    const long long col = lane + kKeyLanes * e;
    if (col < d.v_dim) dvr[col] = narrow<T>(dv[e]);
    if (col < d.head_dim) dkr[col] = narrow<T>(dk[e] * scale);
  }
}

// dQ of one query tile: a block per (batch, query head, query tile), over
// the key tiles it sees.
template <class T, int Rows>
__global__ void __launch_bounds__(kThreads) flash_backward_q_k(BackwardArgs a, Dims d,
                                                               compute_t<T> scale) {
  using C = compute_t<T>;
  using L = RowLanes<Rows>;
  const Tiles<C> t = shared_tiles<C>(Rows, d, true);
  const L lanes;
  const bool docs = a.doc.ids != nullptr;
  const long long q_tiles = (d.q_len + Rows - 1) / Rows;
  const long long bh = blockIdx.x / q_tiles, b = bh / d.q_heads;
  const long long kv = b * d.kv_heads + bh % d.q_heads / d.group();
  const long long i0 = blockIdx.x % q_tiles * Rows, i1 = min(i0 + Rows, d.q_len);

  load_query_tile<T, Rows>(t, a, d, bh, i0);
  if (docs) load_docs(t.qdoc, a.doc, d, b, i0, Rows);
  C dq[L::kColumns];
#pragma unroll
  for (int e = 0; e < L::kColumns; ++e) dq[e] = 0;

  for (long long j0 = 0; j0 < d.kv_len; j0 += kTileK) {
    const long long j1 = min(j0 + kTileK, d.kv_len);
    if (!tile_visible(d, i0, i1, j0, j1)) continue;
    __syncthreads();  // the previous tile's readers are done
    if (docs) {
      load_docs(t.kdoc, a.doc, d, b, j0, kTileK);
      __syncthreads();
      if (!__syncthreads_or(sees_any<Rows>(d, t, docs, i0, j0))) continue;
    }
    load_key_tile<T>(t, a, d, kv, j0);
    __syncthreads();
    probabilities_and_grads<Rows>(d, t, docs, scale, i0, j0);
    __syncthreads();
    for (int c = 0; c < j1 - j0; ++c) {
      const C ds = t.ds[lanes.row * t.ldp + c];
      const C* kr = t.k + c * t.ldq;
#pragma unroll
      for (int e = 0; e < L::kColumns; ++e)
        if (lanes.column(e) < d.head_dim) dq[e] = math::fma(ds, kr[lanes.column(e)], dq[e]);
    }
  }
  const long long i = i0 + lanes.row;
  if (i >= d.q_len) return;
  T* dqr = static_cast<T*>(a.dq) + (bh * d.q_len + i) * d.head_dim;
#pragma unroll
  for (int e = 0; e < L::kColumns; ++e)
    if (lanes.column(e) < d.head_dim) dqr[lanes.column(e)] = narrow<T>(dq[e] * scale);
}

}  // namespace kiln::cuda::flash
