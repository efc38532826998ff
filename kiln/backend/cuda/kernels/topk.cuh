// The topk kernel (launched by topk.cu): one block per line along the axis, k rounds; round t
// picks the first element in the order (value descending, index ascending;
// NaN largest) after round t-1's pick, by a block-wide tree. The order is
// total, as the CPU's, so values and indices (ties included) equal the
// CPU's. O(k * n / threads) per line: simple before fast.
#pragma once
#include "kiln/backend/cuda/kernels/common.cuh"

namespace kiln::cuda::topk {

constexpr int kThreads = 256;

template <class C>
__device__ bool before(C vl, long long l, C vr, long long r) {
  const bool nl = vl != vl, nr = vr != vr;
  if (nl != nr) return nl;
  if (!nl && vl != vr) return vl > vr;
  return l < r;
}

// x as [outer, n, inner]; values and indices as [outer, k, inner].
template <class T>
__global__ void topk_k(const T* x, T* values, int64_t* indices, long long lines, long long n,
                       long long inner, long long k) {
  using C = compute_t<T>;
  KILN_BLOCK_SHARED C best_v[kThreads];
  KILN_BLOCK_SHARED long long best_j[kThreads];
  const int tid = threadIdx.x;
  for (long long line = blockIdx.x; line < lines; line += gridDim.x) {
    const long long o = line / inner, i = line % inner;
    const T* p = x + o * n * inner + i;
    C prev_v{};
    long long prev_j = -1;  // none picked yet
    for (long long t = 0; t < k; ++t) {
      C bv{};
      long long bj = -1;
      for (long long j = tid; j < n; j += kThreads) {
        const C v = widen(p[j * inner]);
        if (prev_j >= 0 && !before(prev_v, prev_j, v, j)) continue;
        if (bj < 0 || before(v, j, bv, bj)) {
          bv = v;
          bj = j;
        }
      }
      best_v[tid] = bv;
      best_j[tid] = bj;
      __syncthreads();
      for (int w = kThreads / 2; w > 0; w /= 2) {
        if (tid < w) {
          const long long oj = best_j[tid + w];
          if (oj >= 0 && (best_j[tid] < 0 || before(best_v[tid + w], oj, best_v[tid], best_j[tid]))) {
            best_v[tid] = best_v[tid + w];
            best_j[tid] = oj;
          }
        }
        __syncthreads();
      }
      prev_v = best_v[0];
      prev_j = best_j[0];
      if (tid == 0) {
        const long long at = (o * k + t) * inner + i;
        values[at] = p[prev_j * inner];
        indices[at] = prev_j;
      }
      __syncthreads();  // before the next round overwrites best_*
    }
  }
}

}  // namespace kiln::cuda::topk
