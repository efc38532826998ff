// The fold operations of sum, mean, max and min, shared by every target (the
// CPU's reduction engine and fused kernels, CUDA's generated kernels); each
// target folds them in its own fixed order (the CPU's: backend/cpu/fold.h).
// Self-contained (KILN_HD): the code generators embed this text.
//
// An Op is { Acc identity; Acc combine(Acc, Acc); Acc load(T x, int64_t out) }
// for input type T. combine need not be associative (float sums): a fixed
// order fixes the result. load may depend on the output index.
#pragma once
#include "kiln/base/host_device.h"
#include "kiln/codegen/scalar.h"

namespace kiln::codegen {

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
  KILN_HD Acc combine(Acc a, Acc b) const { return a + b; }
  KILN_HD Acc load(T x, int64_t) const { return static_cast<Acc>(widen(x)); }
};

// The identities of max and min: -inf and inf for floats, the extreme values
// for integers.
template <class C> struct extremes;
template <> struct extremes<float> {
  KILN_HD static float lowest() { return -bits_float(0x7f800000u); }
  KILN_HD static float highest() { return bits_float(0x7f800000u); }
};
template <> struct extremes<double> {
  KILN_HD static double lowest() { return -double(extremes<float>::highest()); }
  KILN_HD static double highest() { return double(extremes<float>::highest()); }
};
template <> struct extremes<int32_t> {
  KILN_HD static int32_t lowest() { return -2147483647 - 1; }
  KILN_HD static int32_t highest() { return 2147483647; }
};
template <> struct extremes<int64_t> {
  KILN_HD static int64_t lowest() { return -9223372036854775807L - 1; }
  KILN_HD static int64_t highest() { return 9223372036854775807L; }
};

// Max or min; a NaN anywhere gives NaN, as torch.amax does.
template <class T, bool kMax>
struct ExtremumOp {
  using Input = T;
  using C = compute_t<T>;
  C identity = kMax ? extremes<C>::lowest() : extremes<C>::highest();
  KILN_HD C combine(C a, C b) const {
    bool take = (kMax ? b > a : b < a) | (b != b);  // | keeps it branch-free
    return take ? b : a;
  }
  KILN_HD C load(T x, int64_t) const { return widen(x); }
};

}  // namespace kiln::codegen
