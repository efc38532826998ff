// The canonical fold order of every CPU reduction, and the fold operations
// of sum, mean, max and min.
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
// Self-contained (standard headers and scalar.h): the fused-kernel code
// generator embeds this text in the C++ it generates.
#pragma once
#include <cstdint>
#include <limits>

#include "kiln/backend/cpu/scalar.h"

namespace kiln::cpu {

inline constexpr int kLanes = 32;
inline constexpr int64_t kChunk = 4096;  // a multiple of kLanes

// An Op is { Acc identity; Acc combine(Acc, Acc); Acc load(T x, int64_t out) }
// for input type T. combine need not be associative (float sums): the
// canonical order fixes the result. load may depend on the output index.

// Accumulator of sums: f32 for floats up to 32 bits, f64 for f64, i64 for
// integers and bools (counts).
template <class T> struct sum_acc { using type = int64_t; };
template <> struct sum_acc<float> { using type = float; };
template <> struct sum_acc<bf16> { using type = float; };
template <> struct sum_acc<f16> { using type = float; };
template <> struct sum_acc<double> { using type = double; };
template <class T> using sum_acc_t = typename sum_acc<T>::type;

template <class T, class Acc>
struct SumOp {
  using Input = T;
  Acc identity = 0;
  Acc combine(Acc a, Acc b) const { return a + b; }
  Acc load(T x, int64_t) const { return static_cast<Acc>(widen(x)); }
};

// Max or min; a NaN anywhere gives NaN, as torch.amax does.
template <class T, bool kMax>
struct ExtremumOp {
  using Input = T;
  using C = compute_t<T>;
  static C start() {
    using L = std::numeric_limits<C>;
    if constexpr (L::has_infinity) return kMax ? -L::infinity() : L::infinity();
    else return kMax ? L::lowest() : L::max();
  }
  C identity = start();
  C combine(C a, C b) const {
    bool take = (kMax ? b > a : b < a) | (b != b);  // | keeps it branch-free
    return take ? b : a;
  }
  C load(T x, int64_t) const { return widen(x); }
};

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

// One result from its chunks' results, in chunk order.
template <class Acc, class Op>
inline Acc combine_chunks(const Op& op, const Acc* chunk_results, int64_t chunks) {
  if (chunks == 1) return chunk_results[0];
  Acc acc = op.identity;
  for (int64_t c = 0; c < chunks; ++c) acc = op.combine(acc, chunk_results[c]);
  return acc;
}

}  // namespace kiln::cpu
