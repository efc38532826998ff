// Folds of one row per block in the CPU's canonical order
// (kiln/backend/cpu/fold.h): the row's elements r = 0 .. length-1 are cut
// into chunks of kFoldChunk; in a chunk, element r goes to lane r % 32 (a
// warp's lane), each lane folds its elements in order from the identity,
// the lanes fold as the fixed tree w = 16, 8, .., 1 (shuffles), and the
// chunk results fold in chunk order. So a fold gives the same bits run after
// run, and the CPU's bits wherever the loaded values are the same. No atomics.
#pragma once
#include "kiln/backend/cuda/kernels/common.cuh"
#include "kiln/codegen/reduce_ops.h"

namespace kiln::cuda {

inline constexpr int kFoldWarps = 8;
inline constexpr int kFoldThreads = 32 * kFoldWarps;  // the block size of fold kernels
inline constexpr long long kFoldChunk = 4096;          // fold.h's kChunk (kLanes = 32)

// The CPU's fold operations (SumOp; ExtremumOp, a NaN anywhere giving NaN).
using codegen::ExtremumOp;
using codegen::sum_acc_t;
using codegen::SumOp;

// Called by every thread of a kFoldThreads block with the same arguments;
// returns op's fold of load(r) (an accumulator value) over [0, length) to
// every thread.
template <class Op, class Load>
__device__ auto block_fold(const Op& op, long long length, Load load) {
  using C = decltype(op.identity);
  KILN_BLOCK_SHARED C part[kFoldWarps];
  KILN_BLOCK_SHARED C result;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const long long chunks = length > kFoldChunk ? (length + kFoldChunk - 1) / kFoldChunk : 1;
  C acc = op.identity;  // thread 0's
  for (long long g = 0; g < chunks; g += kFoldWarps) {
    const long long c = g + warp;
    if (c < chunks) {
      C v = op.identity;
      const long long end = length < (c + 1) * kFoldChunk ? length : (c + 1) * kFoldChunk;
      for (long long r = c * kFoldChunk + lane; r < end; r += 32) v = op.combine(v, load(r));
      for (int w = 16; w >= 1; w /= 2) v = op.combine(v, __shfl_down_sync(0xffffffffu, v, w));
      if (lane == 0) part[warp] = v;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      if (chunks == 1) acc = part[0];
      else
        for (long long j = g; j < chunks && j < g + kFoldWarps; ++j) acc = op.combine(acc, part[j - g]);
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) result = acc;
  __syncthreads();
  const C out = result;
  __syncthreads();  // every thread has read it before a later fold writes it
  return out;
}

}  // namespace kiln::cuda
