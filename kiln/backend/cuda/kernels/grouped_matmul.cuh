// The grouped matmul kernels on CUDA (launched by grouped_matmul.cu):
// every expert's product in one GEMM launch, with the group sizes read on
// the device (never by the host, so nothing waits and a captured step
// stays valid). A one-thread planning kernel turns the sizes into row
// offsets and each group's first output tile (checking them: a negative
// size or a sum past the rows is reported as an error at the next
// synchronisation, and read as empty); the GEMM's blocks find their group
// by binary search over those tiles.
//
// grouped_matmul: out[rows of e] = x[rows of e] @ w[e]^T (transpose_w) or
// @ w[e]; rows past the last group are zeros. grouped_matmul_weight_grad:
// out[e] = a[rows of e]^T @ b[rows of e] (zeros for an empty group).
//
// A block computes a 64 x 64 output tile over chunks of 32 of the sum,
// each output element summed by one thread (or one tensor-core fragment) in
// a fixed order: the same bits on every run. bf16/f16 multiply on tensor
// cores (WMMA, f32 accumulation, rounded once); f32 and f64 with FMAs in
// their own precision (no TF32).
#pragma once
#include <type_traits>

#include "kiln/backend/cuda/kernels/common.cuh"
#include "kiln/backend/cuda/kernels/index_fault.h"
#include "kiln/codegen/math.h"
#if defined(__CUDACC__)
#include <mma.h>
#endif

namespace kiln::cuda::grouped {

constexpr int kThreads = 256;
constexpr int kTile = 64;    // output rows and columns per block
constexpr int kChunk = 32;   // the sum's chunk per step
constexpr long long kMaxExperts = 1 << 16;

// Group sizes (i32 or i64).
struct Sizes {
  const void* data;
  bool wide;
  __device__ long long operator[](long long e) const {
    return wide ? static_cast<const long long*>(data)[e] : static_cast<const int*>(data)[e];
  }
};

// The planning kernel's output, in scratch: off[E + 1] row offsets and
// tiles[E + 1], the first output row tile of each group (tiles[E]: all).
struct Groups {
  long long* off;
  long long* tiles;
  long long experts;
};

inline __global__ void plan_groups_k(Sizes sizes, Groups g, long long rows, IndexFault* fault,
                              int op) {
  long long at = 0, tiles = 0;
  for (long long e = 0; e < g.experts; ++e) {
    g.off[e] = at;
    g.tiles[e] = tiles;
    long long n = sizes[e];
    if (n < 0 || n > rows - at) {  // read as empty, reported
      if (atomicCAS(&fault->set, 0u, 1u) == 0u) {
        fault->op = op;
        fault->axis = -1;
        fault->value = n;
        fault->position = e;
        fault->size = rows - at;
      }
      n = 0;
    }
    at += n;
    tiles += (n + kTile - 1) / kTile;
  }
  g.off[g.experts] = at;
  g.tiles[g.experts] = tiles;
}

// The group whose row tiles include tile t (tiles[e] <= t < tiles[e + 1]).
inline __device__ long long group_of_tile(const Groups& g, long long t) {
  long long lo = 0, hi = g.experts;  // tiles[lo] <= t < tiles[hi]
  while (hi - lo > 1) {
    const long long mid = (lo + hi) / 2;
    if (g.tiles[mid] <= t) lo = mid;
    else hi = mid;
  }
  return lo;
}

// One group's product C[m, n] = A[m, k] B[k, n] as element addresses: A(i,
// p) = a[a0 + i * ai + p * ap], B(p, j) = b[b0 + p * bp + j * bj].
struct Product {
  long long m, n, k;
  long long a0, ai, ap, b0, bp, bj;
};

template <class T>
constexpr bool kTensorCores = std::is_same_v<T, bf16> || std::is_same_v<T, f16>;

// The tile's operands as the product reads them: 16-bit as stored for the
// tensor cores, else the compute type. A is [kTile][kChunk + pad] (row i,
// sum index p), B [kChunk][kTile + pad].
template <class T>
struct Operands {
  using S = std::conditional_t<kTensorCores<T>, T, compute_t<T>>;
  static constexpr int kLda = kChunk + (kTensorCores<T> ? 8 : 1);
  static constexpr int kLdb = kTile + (kTensorCores<T> ? 8 : 1);
  alignas(32) S a[kTile * kLda];
  alignas(32) S b[kChunk * kLdb];
};

template <class S, class T>
__device__ S load_as(const T& v) {
  if constexpr (std::is_same_v<S, T>) return v;
  else return widen(v);
}

// Loads the chunk [p0, p0 + kChunk) of rows [i0, i0 + kTile) of A and of
// columns [j0, j0 + kTile) of B, zeros outside the product. Consecutive
// threads take consecutive addresses of the operand's faster index.
template <class T>
__device__ void load_chunk(Operands<T>& s, const T* a, const T* b, const Product& p, long long i0,
                           long long j0, long long p0) {
  using S = typename Operands<T>::S;
  for (int e = threadIdx.x; e < kTile * kChunk; e += kThreads) {
    // A: along p when its sum index is the faster one.
    const bool a_by_p = p.ap <= p.ai;
    const int i = a_by_p ? e / kChunk : e % kTile, q = a_by_p ? e % kChunk : e / kTile;
    const bool ok = i0 + i < p.m && p0 + q < p.k;
    s.a[i * s.kLda + q] = ok ? load_as<S>(a[p.a0 + (i0 + i) * p.ai + (p0 + q) * p.ap]) : S(0);
    const bool b_by_j = p.bj <= p.bp;
    const int j = b_by_j ? e % kTile : e / kChunk, r = b_by_j ? e / kTile : e % kChunk;
    const bool okb = p0 + r < p.k && j0 + j < p.n;
    s.b[r * s.kLdb + j] = okb ? load_as<S>(b[p.b0 + (p0 + r) * p.bp + (j0 + j) * p.bj]) : S(0);
  }
}

// The tile's result in f32 (f64 for f64), [kTile][kTile + 4], for the store.
template <class T>
struct Result {
  static constexpr int kLd = kTile + 4;
  alignas(32) compute_t<T> c[kTile * kLd];
};

// C tile (i0, j0) of the product, written to out[o0 + i * oi + j] (row
// stride oi) in T.
template <class T>
__device__ void product_tile(const T* a, const T* b, const Product& p, long long i0, long long j0,
                             T* out, long long o0, long long oi) {
  using C = compute_t<T>;
  // The operands, then (after the last chunk) the result, in one buffer.
  constexpr size_t kBytes =
      sizeof(Operands<T>) > sizeof(Result<T>) ? sizeof(Operands<T>) : sizeof(Result<T>);
  alignas(32) KILN_BLOCK_SHARED unsigned char smem[kBytes];
  Operands<T>& s = *reinterpret_cast<Operands<T>*>(smem);
  Result<T>& r = *reinterpret_cast<Result<T>*>(smem);
  if constexpr (kTensorCores<T>) {
    namespace wmma = nvcuda::wmma;
    using W = tensor_core_t<T>;
    // 8 warps in 4 x 2: each owns rows 16 * wm and columns 32 * wn (two fragments).
    const int warp = threadIdx.x / 32, wm = warp / 2, wn = warp % 2;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2];
    for (auto& f : acc) wmma::fill_fragment(f, 0.0f);
    for (long long p0 = 0; p0 < p.k; p0 += kChunk) {
      __syncthreads();  // the previous chunk's readers are done
      load_chunk(s, a, b, p, i0, j0, p0);
      __syncthreads();
      for (int q = 0; q < kChunk; q += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, W, wmma::row_major> fa;
        wmma::load_matrix_sync(fa, reinterpret_cast<const W*>(s.a + wm * 16 * s.kLda + q), s.kLda);
        for (int f = 0; f < 2; ++f) {
          wmma::fragment<wmma::matrix_b, 16, 16, 16, W, wmma::row_major> fb;
          wmma::load_matrix_sync(fb, reinterpret_cast<const W*>(s.b + q * s.kLdb + wn * 32 + f * 16),
                                 s.kLdb);
          wmma::mma_sync(acc[f], fa, fb, acc[f]);
        }
      }
    }
    __syncthreads();  // the operands' readers are done: the result takes their place
    for (int f = 0; f < 2; ++f)
      wmma::store_matrix_sync(r.c + wm * 16 * r.kLd + wn * 32 + f * 16, acc[f], r.kLd,
                              wmma::mem_row_major);
  } else {
    // 16 x 16 threads, each a 4 x 4 block of the tile.
    const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
    C acc[4][4] = {};
    for (long long p0 = 0; p0 < p.k; p0 += kChunk) {
      __syncthreads();
      load_chunk(s, a, b, p, i0, j0, p0);
      __syncthreads();
      for (int q = 0; q < kChunk; ++q) {
        C av[4], bv[4];
        for (int u = 0; u < 4; ++u) av[u] = s.a[(ty * 4 + u) * s.kLda + q];
        for (int v = 0; v < 4; ++v) bv[v] = s.b[q * s.kLdb + tx * 4 + v];
        for (int u = 0; u < 4; ++u)
          for (int v = 0; v < 4; ++v) acc[u][v] = codegen::math::fma(av[u], bv[v], acc[u][v]);
      }
    }
    __syncthreads();  // the operands' readers are done: the result takes their place
    for (int u = 0; u < 4; ++u)
      for (int v = 0; v < 4; ++v) r.c[(ty * 4 + u) * r.kLd + tx * 4 + v] = acc[u][v];
  }
  __syncthreads();
  for (int e = threadIdx.x; e < kTile * kTile; e += kThreads) {
    const int i = e / kTile, j = e % kTile;
    if (i0 + i < p.m && j0 + j < p.n) out[o0 + (i0 + i) * oi + j0 + j] = narrow<T>(r.c[i * r.kLd + j]);
  }
}

// grouped_matmul: blockIdx.x a row tile of some group (past the last:
// nothing), blockIdx.y a column tile.
template <class T>
__global__ void __launch_bounds__(kThreads)
    grouped_k(const T* x, const T* w, T* out, Groups g, long long n, long long k, bool tw) {
  const long long t = blockIdx.x;
  if (t >= g.tiles[g.experts]) return;
  const long long e = group_of_tile(g, t);
  const long long first = g.off[e];
  // x rows of e: [first, first + m); w[e] is [n, k] (tw) or [k, n].
  const Product p{g.off[e + 1] - first, n, k, first * k, k, 1, e * n * k, tw ? 1 : n, tw ? k : 1};
  product_tile(x, w, p, (t - g.tiles[e]) * kTile, (long long)blockIdx.y * kTile, out, first * n, n);
}

// grouped_matmul_weight_grad: blockIdx.x = (expert, row tile of P),
// blockIdx.y a column tile of Q.
template <class T>
__global__ void __launch_bounds__(kThreads)
    weight_grad_k(const T* a, const T* b, T* out, Groups g, long long P, long long Q) {
  const long long row_tiles = (P + kTile - 1) / kTile;
  const long long e = blockIdx.x / row_tiles;
  const long long first = g.off[e];
  // out[e][i][j] = sum over rows r of e of a[r][i] b[r][j].
  const Product p{P, Q, g.off[e + 1] - first, first * P, 1, P, first * Q, Q, 1};
  product_tile(a, b, p, blockIdx.x % row_tiles * kTile, (long long)blockIdx.y * kTile, out,
               e * P * Q, Q);
}

// Rows from the end of the groups on are padding: zeros.
template <class T>
__global__ void zero_padding_k(T* out, Groups g, long long n, long long total) {
  for (long long e = g.off[g.experts] * n + grid_start(); e < total; e += grid_step())
    out[e] = narrow<T>(compute_t<T>(0));
}

}  // namespace kiln::cuda::grouped
