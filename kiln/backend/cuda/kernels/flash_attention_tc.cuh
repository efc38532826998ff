// Flash attention on tensor cores, for bf16/f16 inputs whose head dims are
// multiples of 16: the structure of flash_attention.cuh (a block per query
// tile walking the key tiles with an online softmax; a backward of one
// kernel per key tile for dK and dV and one per query tile for dQ, no
// atomics), with every product a block-wide tensor-core GEMM (WMMA, 16 x
// 16 x 16 fragments, f32 accumulation) over 64 x 64 tiles in shared
// memory. Scores, the softmax statistics and the accumulators stay f32;
// the probabilities and dS round to the input dtype for their products, as
// the composite (and FlashAttention) round them.
#pragma once
#include <type_traits>

#include "kiln/backend/cuda/kernels/flash_attention.cuh"
#if defined(__CUDACC__)
#include <mma.h>
#endif

namespace kiln::cuda::flash {

constexpr int kTcTile = 64;  // queries and keys per tile
constexpr int kTcWarps = kThreads / 32;

// The shared-memory tiles, padded (16-bit rows by 8, f32 rows by 4) as the
// fragments' loads want: q, k, v, dout [64][dim]; s, dp f32 [64][64]; p, ds
// [64][64]; acc and acc2 f32 accumulators [64][dim]; lse and delta; the
// tiles' document ids.
template <class T>
struct TcTiles {
  long long *qdoc, *kdoc;
  float *s, *dp, *acc, *acc2, *lse, *delta;
  T *q, *k, *v, *dout, *p, *ds;
  int ldq, ldv, ldp, lds, lda, lda2;

  // forward: q, k, v, s, p, acc (the output, dim v_dim). backward: all, acc
  // and acc2 of dims `acc_dim` and `acc2_dim` (0: none).
  __host__ __device__ static size_t carve(TcTiles& t, unsigned char* base, long long d,
                                          long long dv, bool backward, long long acc_dim,
                                          long long acc2_dim) {
    size_t at = 0;
    auto take = [&](size_t n, size_t size) {
      unsigned char* p = base ? base + at : nullptr;
      at += (n * size + 31) / 32 * 32;  // fragments load from 32-byte boundaries
      return p;
    };
    t.ldq = int(d) + 8;
    t.ldv = int(dv) + 8;
    t.ldp = kTcTile + 8;
    t.lds = kTcTile + 4;
    t.lda = int(acc_dim) + 4;
    t.lda2 = int(acc2_dim) + 4;
    t.qdoc = reinterpret_cast<long long*>(take(kTcTile, 8));
    t.kdoc = reinterpret_cast<long long*>(take(kTcTile, 8));
    t.q = reinterpret_cast<T*>(take(size_t(kTcTile * t.ldq), sizeof(T)));
    t.k = reinterpret_cast<T*>(take(size_t(kTcTile * t.ldq), sizeof(T)));
    t.v = reinterpret_cast<T*>(take(size_t(kTcTile * t.ldv), sizeof(T)));
    t.s = reinterpret_cast<float*>(take(size_t(kTcTile * t.lds), 4));
    t.p = reinterpret_cast<T*>(take(size_t(kTcTile * t.ldp), sizeof(T)));
    t.acc = reinterpret_cast<float*>(take(size_t(kTcTile * t.lda), 4));
    t.dout = t.ds = nullptr;
    t.dp = t.acc2 = t.lse = t.delta = nullptr;
    if (backward) {
      t.dout = reinterpret_cast<T*>(take(size_t(kTcTile * t.ldv), sizeof(T)));
      t.dp = reinterpret_cast<float*>(take(size_t(kTcTile * t.lds), 4));
      t.ds = reinterpret_cast<T*>(take(size_t(kTcTile * t.ldp), sizeof(T)));
      t.acc2 = reinterpret_cast<float*>(take(size_t(kTcTile * t.lda2), 4));
      t.lse = reinterpret_cast<float*>(take(kTcTile, 4));
      t.delta = reinterpret_cast<float*>(take(kTcTile, 4));
    }
    return at;
  }
};

template <class T>
__device__ TcTiles<T> tc_tiles(const Dims& d, bool backward, long long acc_dim,
                               long long acc2_dim) {
  TcTiles<T> t;
  TcTiles<T>::carve(t, dynamic_shared(), d.head_dim, d.v_dim, backward, acc_dim, acc2_dim);
  return t;
}

// dst[r][c] = src row first + r as stored (zeros past `valid`), 64 rows.
template <class T>
__device__ void copy_rows(T* dst, int ld, const T* src, long long first, long long valid,
                          long long width) {
  const T zero = narrow<T>(0.0f);
  for (long long e = threadIdx.x; e < kTcTile * width; e += kThreads) {
    const long long r = e / width, c = e % width;
    dst[r * ld + c] = first + r < valid ? src[(first + r) * width + c] : zero;
  }
}

inline __device__ void zero_rows(float* dst, int ld, long long width) {
  for (long long e = threadIdx.x; e < kTcTile * width; e += kThreads)
    dst[e / width * ld + e % width] = 0;
}

// A fragment's layout in memory: row-major, or column-major (a transposed
// operand read in place).
namespace wmma = nvcuda::wmma;
using Rows = wmma::row_major;
using Cols = wmma::col_major;

// out[64][n] (=|+=) A[64][k] B[k][n], A and B in shared memory as their
// layouts say (element (i, j) of a col-major operand is at p[j * ld + i]),
// out f32 with row stride ldo; n <= kMaxHeadDim and k multiples of 16.
// Warp w owns the 16-row band w % 4 and every other 16-column block from
// w / 4: it loads each A fragment of its band once per step of the sum and
// keeps its accumulators in registers; each output sums in a fixed order.
template <class LA, class LB, class T>
__device__ void block_mma(float* out, int ldo, const T* a, int lda, const T* b, int ldb,
                          long long n, long long k, bool accumulate) {
  using W = tensor_core_t<T>;
  constexpr int kBands = kTcTile / 16;          // 16-row bands of the output
  constexpr int kStep = kTcWarps / kBands;      // warps per band
  constexpr int kMaxBlocks = kMaxHeadDim / 16 / kStep;  // column blocks per warp, at most
  const int warp = int(threadIdx.x) / 32, band = warp % kBands, first = warp / kBands;
  const int blocks = int(n / 16);
  float* o = out + band * 16 * ldo;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[kMaxBlocks];
#pragma unroll
  for (int i = 0; i < kMaxBlocks; ++i) {
    const int fn = first + i * kStep;
    if (fn >= blocks) continue;
    if (accumulate) wmma::load_matrix_sync(acc[i], o + fn * 16, unsigned(ldo), wmma::mem_row_major);
    else wmma::fill_fragment(acc[i], 0.0f);
  }
  for (long long q = 0; q < k; q += 16) {
    // A's fragment (the band's rows, sum q), then B's (sum q, each block).
    const T* pa = std::is_same_v<LA, Rows> ? a + band * 16 * lda + q : a + q * lda + band * 16;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, W, LA> fa;
    wmma::load_matrix_sync(fa, reinterpret_cast<const W*>(pa), unsigned(lda));
#pragma unroll
    for (int i = 0; i < kMaxBlocks; ++i) {
      const int fn = first + i * kStep;
      if (fn >= blocks) continue;
      const T* pb = std::is_same_v<LB, Rows> ? b + q * ldb + fn * 16 : b + fn * 16 * ldb + q;
      wmma::fragment<wmma::matrix_b, 16, 16, 16, W, LB> fb;
      wmma::load_matrix_sync(fb, reinterpret_cast<const W*>(pb), unsigned(ldb));
      wmma::mma_sync(acc[i], fa, fb, acc[i]);
    }
  }
#pragma unroll
  for (int i = 0; i < kMaxBlocks; ++i) {
    const int fn = first + i * kStep;
    if (fn < blocks) wmma::store_matrix_sync(o + fn * 16, acc[i], unsigned(ldo), wmma::mem_row_major);
  }
}

// The threads of a row of a 64-wide tile: 4 consecutive lanes, each taking
// columns lane, lane + 4, ...
struct TcRow {
  static constexpr int kLanes = kThreads / kTcTile;
  int row, lane;
  __device__ TcRow() : row(int(threadIdx.x) / kLanes), lane(int(threadIdx.x) % kLanes) {}
  __device__ static float max(float x) {
    for (int off = kLanes / 2; off > 0; off /= 2) x = larger(x, __shfl_xor_sync(0xffffffffu, x, off));
    return x;
  }
  __device__ static float sum(float x) {
    for (int off = kLanes / 2; off > 0; off /= 2) x += __shfl_xor_sync(0xffffffffu, x, off);
    return x;
  }
};

// Whether some (query, key) pair of this thread's row may attend, for the
// documents' skip of a tile.
template <class T>
__device__ bool tc_sees_any(const Dims& d, const TcTiles<T>& t, long long i0, long long j0) {
  const TcRow me;
  bool any = false;
  for (int c = me.lane; c < kTcTile; c += TcRow::kLanes)
    any = any || allowed(d, t.qdoc, t.kdoc, i0 + me.row, j0 + c, me.row, c);
  return any;
}

// Loads the key tile's documents and says whether the block may skip the
// tile (no document pair shared); every thread calls it.
template <class T>
__device__ bool tc_skip_for_documents(const Dims& d, const TcTiles<T>& t, const DocIds& doc,
                                      long long b, long long i0, long long j0, bool load_keys) {
  if (load_keys) load_docs(t.kdoc, doc, d, b, j0, kTcTile);
  else load_docs(t.qdoc, doc, d, b, i0, kTcTile);
  __syncthreads();
  return !__syncthreads_or(tc_sees_any(d, t, i0, j0));
}

template <class T>
__global__ void __launch_bounds__(kThreads)
    flash_forward_tc_k(const T* q, const T* k, const T* v, DocIds doc, T* out, float* lse,
                       Dims d, float scale) {
  const TcTiles<T> t = tc_tiles<T>(d, false, d.v_dim, 0);
  const TcRow me;
  const bool docs = doc.ids != nullptr;
  const long long D = d.head_dim, Dv = d.v_dim;
  const long long q_tiles = (d.q_len + kTcTile - 1) / kTcTile;
  const long long bh = blockIdx.x / q_tiles, b = bh / d.q_heads, h = bh % d.q_heads;
  const long long kv = b * d.kv_heads + h / d.group();
  const long long i0 = blockIdx.x % q_tiles * kTcTile, i1 = min(i0 + kTcTile, d.q_len);
  const long long i = i0 + me.row;
  const float ninf = -INFINITY;

  copy_rows(t.q, t.ldq, q + bh * d.q_len * D, i0, d.q_len, D);
  if (docs) load_docs(t.qdoc, doc, d, b, i0, kTcTile);
  zero_rows(t.acc, t.lda, Dv);
  float m = ninf, l = 0;

  for (long long j0 = 0; j0 < d.kv_len; j0 += kTcTile) {
    const long long j1 = min(j0 + kTcTile, d.kv_len);
    if (!tile_visible(d, i0, i1, j0, j1)) continue;
    __syncthreads();  // the previous tile's readers are done
    if (docs && tc_skip_for_documents(d, t, doc, b, i0, j0, true)) continue;
    copy_rows(t.k, t.ldq, k + kv * d.kv_len * D, j0, d.kv_len, D);
    copy_rows(t.v, t.ldv, v + kv * d.kv_len * Dv, j0, d.kv_len, Dv);
    __syncthreads();
    block_mma<Rows, Cols>(t.s, t.lds, t.q, t.ldq, t.k, t.ldq, kTcTile, D, false);  // q k^T
    __syncthreads();

    float* sr = t.s + me.row * t.lds;
    float mx = ninf;
    for (int c = me.lane; c < kTcTile; c += TcRow::kLanes) {
      sr[c] = allowed(d, docs ? t.qdoc : nullptr, t.kdoc, i, j0 + c, me.row, c) ? sr[c] * scale
                                                                                : ninf;
      mx = larger(mx, sr[c]);
    }
    mx = TcRow::max(mx);
    const bool none = mx == ninf;  // every lane still shuffles below
    const float mn = none ? m : larger(m, mx);
    float sum = 0;
    T* pr = t.p + me.row * t.ldp;
    for (int c = me.lane; c < kTcTile; c += TcRow::kLanes) {
      const float p = none ? 0.0f : math::exp(sr[c] - mn);
      sum += p;
      pr[c] = narrow<T>(p);
    }
    sum = TcRow::sum(sum);
    if (!none) {
      const float corr = math::exp(m - mn);  // 0 on the row's first visible tile
      l = l * corr + sum;
      m = mn;
      float* orow = t.acc + me.row * t.lda;
      for (long long c = me.lane; c < Dv; c += TcRow::kLanes) orow[c] *= corr;
    }
    __syncthreads();
    block_mma<Rows, Rows>(t.acc, t.lda, t.p, t.ldp, t.v, t.ldv, Dv, kTcTile, true);  // += p v
  }
  __syncthreads();
  if (i >= d.q_len) return;
  const float inv = l > 0 ? 1.0f / l : 0.0f;
  const float* orow = t.acc + me.row * t.lda;
  T* dst = out + (bh * d.q_len + i) * Dv;
  for (long long c = me.lane; c < Dv; c += TcRow::kLanes) dst[c] = narrow<T>(orow[c] * inv);
  if (me.lane == 0) lse[bh * d.q_len + i] = m + math::log(l);
}

// The backward's shared step for a loaded query tile (q, dout, lse, delta)
// and key tile (k, v): S = q k^T and dP = dout v^T on tensor cores, then
// P = exp(scale S - lse) and dS = P (dP - delta), rounded to T, zero where
// masked.
template <class T>
__device__ void tc_probabilities_and_grads(const Dims& d, const TcTiles<T>& t, bool docs,
                                           float scale, long long i0, long long j0) {
  block_mma<Rows, Cols>(t.s, t.lds, t.q, t.ldq, t.k, t.ldq, kTcTile, d.head_dim, false);
  block_mma<Rows, Cols>(t.dp, t.lds, t.dout, t.ldv, t.v, t.ldv, kTcTile, d.v_dim, false);
  __syncthreads();
  const TcRow me;
  const float lse = t.lse[me.row], delta = t.delta[me.row];
  for (int c = me.lane; c < kTcTile; c += TcRow::kLanes) {
    const bool ok = allowed(d, docs ? t.qdoc : nullptr, t.kdoc, i0 + me.row, j0 + c, me.row, c);
    const float p = ok ? math::exp(t.s[me.row * t.lds + c] * scale - lse) : 0.0f;
    t.p[me.row * t.ldp + c] = narrow<T>(p);
    t.ds[me.row * t.ldp + c] = narrow<T>(ok ? p * (t.dp[me.row * t.lds + c] - delta) : 0.0f);
  }
}

// Loads query tile i0 of head bh: q, dout, lse and delta (zeros past the end).
template <class T>
__device__ void tc_load_query_tile(const TcTiles<T>& t, const BackwardArgs& a, const Dims& d,
                                   long long bh, long long i0) {
  const long long row0 = bh * d.q_len;
  copy_rows(t.q, t.ldq, static_cast<const T*>(a.q) + row0 * d.head_dim, i0, d.q_len, d.head_dim);
  copy_rows(t.dout, t.ldv, static_cast<const T*>(a.dout) + row0 * d.v_dim, i0, d.q_len, d.v_dim);
  load_values(t.lse, static_cast<const float*>(a.lse) + row0, i0, d.q_len, kTcTile);
  load_values(t.delta, static_cast<const float*>(a.delta) + row0, i0, d.q_len, kTcTile);
}

template <class T>
__device__ void tc_load_key_tile(const TcTiles<T>& t, const BackwardArgs& a, const Dims& d,
                                 long long kv, long long j0) {
  copy_rows(t.k, t.ldq, static_cast<const T*>(a.k) + kv * d.kv_len * d.head_dim, j0, d.kv_len,
            d.head_dim);
  copy_rows(t.v, t.ldv, static_cast<const T*>(a.v) + kv * d.kv_len * d.v_dim, j0, d.kv_len,
            d.v_dim);
}

// dst rows [first, first + 64) (those before `valid`) = acc * factor.
template <class T>
__device__ void store_rows(T* dst, const float* acc, int lda, long long first, long long valid,
                           long long width, float factor) {
  for (long long e = threadIdx.x; e < kTcTile * width; e += kThreads) {
    const long long r = e / width, c = e % width;
    if (first + r < valid) dst[(first + r) * width + c] = narrow<T>(acc[r * lda + c] * factor);
  }
}

// dK (acc) and dV (acc2) of one key tile, over the group's query heads and
// the query tiles that see it.
template <class T>
__global__ void __launch_bounds__(kThreads) flash_backward_kv_tc_k(BackwardArgs a, Dims d,
                                                                   float scale) {
  const TcTiles<T> t = tc_tiles<T>(d, true, d.head_dim, d.v_dim);
  const bool docs = a.doc.ids != nullptr;
  const long long k_tiles = (d.kv_len + kTcTile - 1) / kTcTile;
  const long long kv = blockIdx.x / k_tiles, b = kv / d.kv_heads;
  const long long j0 = blockIdx.x % k_tiles * kTcTile, j1 = min(j0 + kTcTile, d.kv_len);

  tc_load_key_tile(t, a, d, kv, j0);
  if (docs) load_docs(t.kdoc, a.doc, d, b, j0, kTcTile);
  zero_rows(t.acc, t.lda, d.head_dim);
  zero_rows(t.acc2, t.lda2, d.v_dim);
  const long long G = d.group();
  for (long long h = kv % d.kv_heads * G; h < (kv % d.kv_heads + 1) * G; ++h) {
    const long long bh = b * d.q_heads + h;
    for (long long i0 = 0; i0 < d.q_len; i0 += kTcTile) {
      const long long i1 = min(i0 + kTcTile, d.q_len);
      if (!tile_visible(d, i0, i1, j0, j1)) continue;
      __syncthreads();  // the previous tile's readers are done
      if (docs && tc_skip_for_documents(d, t, a.doc, b, i0, j0, false)) continue;
      tc_load_query_tile(t, a, d, bh, i0);
      __syncthreads();
      tc_probabilities_and_grads(d, t, docs, scale, i0, j0);
      __syncthreads();
      // dV += P^T dout, dK += dS^T q (P and dS read transposed).
      block_mma<Cols, Rows>(t.acc2, t.lda2, t.p, t.ldp, t.dout, t.ldv, d.v_dim, kTcTile, true);
      block_mma<Cols, Rows>(t.acc, t.lda, t.ds, t.ldp, t.q, t.ldq, d.head_dim, kTcTile, true);
    }
  }
  __syncthreads();
  const long long row0 = kv * d.kv_len;
  store_rows(static_cast<T*>(a.dk) + row0 * d.head_dim, t.acc, t.lda, j0, d.kv_len, d.head_dim,
             scale);
  store_rows(static_cast<T*>(a.dv) + row0 * d.v_dim, t.acc2, t.lda2, j0, d.kv_len, d.v_dim, 1.0f);
}

// dQ (acc) of one query tile, over the key tiles it sees.
template <class T>
__global__ void __launch_bounds__(kThreads) flash_backward_q_tc_k(BackwardArgs a, Dims d,
                                                                  float scale) {
  const TcTiles<T> t = tc_tiles<T>(d, true, d.head_dim, 0);
  const bool docs = a.doc.ids != nullptr;
  const long long q_tiles = (d.q_len + kTcTile - 1) / kTcTile;
  const long long bh = blockIdx.x / q_tiles, b = bh / d.q_heads;
  const long long kv = b * d.kv_heads + bh % d.q_heads / d.group();
  const long long i0 = blockIdx.x % q_tiles * kTcTile, i1 = min(i0 + kTcTile, d.q_len);

  tc_load_query_tile(t, a, d, bh, i0);
  if (docs) load_docs(t.qdoc, a.doc, d, b, i0, kTcTile);
  zero_rows(t.acc, t.lda, d.head_dim);
  for (long long j0 = 0; j0 < d.kv_len; j0 += kTcTile) {
    const long long j1 = min(j0 + kTcTile, d.kv_len);
    if (!tile_visible(d, i0, i1, j0, j1)) continue;
    __syncthreads();  // the previous tile's readers are done
    if (docs && tc_skip_for_documents(d, t, a.doc, b, i0, j0, true)) continue;
    tc_load_key_tile(t, a, d, kv, j0);
    __syncthreads();
    tc_probabilities_and_grads(d, t, docs, scale, i0, j0);
    __syncthreads();
    block_mma<Rows, Rows>(t.acc, t.lda, t.ds, t.ldp, t.k, t.ldq, d.head_dim, kTcTile, true);
  }
  __syncthreads();
  store_rows(static_cast<T*>(a.dq) + bh * d.q_len * d.head_dim, t.acc, t.lda, i0, d.q_len,
             d.head_dim, scale);
}

}  // namespace kiln::cuda::flash
