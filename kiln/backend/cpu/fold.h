// The canonical fold order of every CPU reduction.
//
// One result folds its reduced elements r = 0 .. length-1 (row-major over
// the reduced axes) like this: the elements are cut into chunks of kChunk;
// inside a chunk element r goes to lane r % kLanes, each lane folds its
// elements in order starting from the identity, and the lanes fold as a
// fixed tree (fold_lanes); the chunk results then fold in chunk order
// (combine_chunks). Every kernel that reduces — the eager reduction engine
// (reduction_engine.h), the fused-kernel interpreter and the generated fused
// kernels — folds in this order, so they all give the same bits.
//
// Self-contained (standard headers and the portable headers of
// kiln/codegen): the CPU code generator embeds this text in the C++ it
// generates.
#pragma once
#include <cstdint>

#include "kiln/codegen/reduce_ops.h"

namespace kiln::cpu {

inline constexpr int kLanes = 32;
inline constexpr int64_t kChunk = 4096;  // a multiple of kLanes

// The fold operations (SumOp, ExtremumOp: kiln/codegen/reduce_ops.h) under
// the names the CPU kernels use them by.
using codegen::ExtremumOp;
using codegen::sum_acc_t;
using codegen::SumOp;

// Folds elements i = 0 .. n-1 of one chunk into lanes, element i going to
// lane (lane + i) % kLanes; value(i) gives the element's accumulator value.
template <class Acc, class Op, class Value>
inline void fold_run(const Op& op, Acc* lanes, int64_t n, int lane, Value&& value) {
  int64_t i = 0;
  for (; i < n && lane != 0; ++i, lane = (lane + 1) % kLanes)
    lanes[lane] = op.combine(lanes[lane], value(i));
  // The lanes are independent, so `omp simd` only asks for what the
  // compiler may do anyway (it can misjudge the profit without it).
  for (; i + kLanes <= n; i += kLanes) {
#pragma omp simd
    for (int j = 0; j < kLanes; ++j) lanes[j] = op.combine(lanes[j], value(i + j));
  }
  for (int j = 0; i < n; ++i, ++j) lanes[j] = op.combine(lanes[j], value(i));
}

// The fixed tree over the lanes; the chunk's result ends in lanes[0].
template <class Acc, class Op>
inline void fold_lanes(const Op& op, Acc* lanes) {
  for (int w = kLanes / 2; w >= 1; w /= 2)
    for (int j = 0; j < w; ++j) lanes[j] = op.combine(lanes[j], lanes[j + w]);
}

// fold_lanes for nb neighbouring results at once, lane j of result b at
// lanes[j * stride + b]; the results end in lanes[0 .. nb). The same tree,
// vectorised across the results: a short reduction with many results
// (summing a few rows) spends most of its time here.
template <class Acc, class Op>
inline void fold_lane_columns(const Op& op, Acc* lanes, int64_t stride, int64_t nb) {
  for (int w = kLanes / 2; w >= 1; w /= 2)
    for (int j = 0; j < w; ++j) {
      Acc* __restrict to = lanes + j * stride;
      const Acc* __restrict from = lanes + (j + w) * stride;
      for (int64_t b = 0; b < nb; ++b) to[b] = op.combine(to[b], from[b]);
    }
}

// One result from its chunks' results, in chunk order.
template <class Acc, class Op>
inline Acc combine_chunks(const Op& op, const Acc* chunk_results, int64_t chunks) {
  if (chunks == 1) return chunk_results[0];
  Acc acc = op.identity;
  for (int64_t c = 0; c < chunks; ++c) acc = op.combine(acc, chunk_results[c]);
  return acc;
}

}  // namespace kiln::cpu
