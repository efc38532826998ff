// Helpers the fused kernels share: their dtype dispatch, scratch memory from
// the device's caching allocator (so kiln::memory_stats counts it), inputs
// viewed in their compute type, and row reductions written so that they vectorise while summing in a
// fixed order.
#pragma once
#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>
#include <vector>

#include "kiln/backend/cpu/loops.h"
#include "kiln/backend/cpu/matmul_path.h"
#include "kiln/codegen/math.h"
#include "kiln/codegen/scalar.h"
#include "kiln/runtime/backend.h"

namespace kiln::cpu {

// Calls f(tag) for the floating storage types (the fused ops' shape rules
// admit no others).
template <class F>
void visit_floating(DType t, F&& f) {
  visit_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, bf16> || std::is_same_v<T, f16>)
      f(tag);
  });
}

// An uninitialised buffer of n elements of T from the CPU caching allocator.
template <class T>
class Scratch {
 public:
  explicit Scratch(int64_t n) : storage_(kCPU, size_t(std::max<int64_t>(n, 1)) * sizeof(T)) {}
  T* data() const { return static_cast<T*>(storage_.data); }

 private:
  Storage storage_;
};

// Whether a tensor of dtype t is stored as C.
template <class C>
bool stored_as(DType t) {
  return t == dtype_of<C>::value;
}

// n elements of a contiguous tensor stored as T, from element offset `at`,
// read as compute values / written from them (rounding to T).
template <class T, class C>
void load_as(const TensorRef& t, int64_t at, int64_t n, C* out) {
  const char* in = static_cast<const char*>(t.data) + at * int64_t(sizeof(T));
  for (int64_t i = 0; i < n; ++i) out[i] = C(load<T>(in + i * int64_t(sizeof(T))));
}

template <class T, class C>
void store_as(const TensorRef& t, int64_t at, const C* in, int64_t n) {
  char* out = static_cast<char*>(t.data) + at * int64_t(sizeof(T));
  for (int64_t i = 0; i < n; ++i) store<T>(out + i * int64_t(sizeof(T)), in[i]);
}

// The same for the tensor's own dtype.
template <class C>
void load_compute(const TensorRef& t, int64_t at, int64_t n, C* out) {
  visit_dtype(t.dtype, [&](auto tag) { load_as<decltype(tag)>(t, at, n, out); });
}

template <class C>
void store_row(const TensorRef& t, int64_t at, const C* in, int64_t n) {
  visit_dtype(t.dtype, [&](auto tag) { store_as<decltype(tag)>(t, at, in, n); });
}

// A contiguous tensor's elements as C: the tensor's own buffer when it is
// stored as C, else a converted copy.
template <class C>
class AsCompute {
 public:
  explicit AsCompute(const TensorRef& t) {
    if (stored_as<C>(t.dtype)) {
      data_ = t.ptr<C>();
      return;
    }
    copy_.emplace(t.numel());
    C* out = copy_->data();
    parallel_for(t.numel(), 1,
                 [&](int64_t b, int64_t e) { load_compute(t, b, e - b, out + b); });
    data_ = out;
  }
  const C* data() const { return data_; }

 private:
  std::optional<Scratch<C>> copy_;
  const C* data_ = nullptr;
};

// Integer tensors (i32 or i64) widened to i64.
inline std::vector<int64_t> int_values(const TensorRef& t) {
  std::vector<int64_t> v(size_t(t.numel()));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = t.dtype == DType::i32 ? int64_t(t.ptr<int32_t>()[i]) : t.ptr<int64_t>()[i];
  return v;
}

// Sums over a row in 16 interleaved lanes combined in order: vectorisable,
// and the same bits for the same row however the work is split.
constexpr int kLanes = 16;

template <class C, class F>
C lane_sum(int64_t n, F f) {
  C acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
#pragma omp simd  // the lanes are independent: GCC's SLP otherwise leaves them scalar
    for (int k = 0; k < kLanes; ++k) acc[k] += f(i + k);
  for (int k = 1; k < kLanes; ++k) acc[0] += acc[k];
  for (; i < n; ++i) acc[0] += f(i);
  return acc[0];
}

template <class C>
C row_max(const C* p, int64_t n) {
  C acc[kLanes];
  std::fill(acc, acc + kLanes, -std::numeric_limits<C>::infinity());
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
#pragma omp simd
    for (int k = 0; k < kLanes; ++k) acc[k] = std::max(acc[k], p[i + k]);
  for (int k = 1; k < kLanes; ++k) acc[0] = std::max(acc[0], acc[k]);
  for (; i < n; ++i) acc[0] = std::max(acc[0], p[i]);
  return acc[0];
}

// A range [lo, hi) of a row's columns.
struct Cols {
  int64_t lo, hi;
};

// c widened to whole vectors of kLanes within [0, n), for a loop whose
// result outside c is the same either way (masked scores, whose
// exponentials are 0): a partial vector would run as a scalar remainder.
inline Cols whole_lanes(Cols c, int64_t n) {
  return {c.lo / kLanes * kLanes, std::min(n, (c.hi + kLanes - 1) / kLanes * kLanes)};
}

// One row of an online softmax: folds scores z[0, n) into the row's running
// max m and sum of exponentials l, leaving exp(z - m) in z, and returns the
// factor sums made before scale by, exp(old m - new m). A row with nothing
// visible (all -inf) becomes zeros and changes nothing (factor 1). Where the
// caller knows every score outside `visible` is -inf (a causal mask), those
// are set to their exponential, 0, without computing it; the sum still runs
// over the whole row, so the bits do not depend on the range.
template <class C>
C online_softmax_row(C* z, int64_t n, C& m, C& l, Cols visible) {
  const auto [lo, hi] = whole_lanes(visible, n);
  const C mx = row_max(z + lo, hi - lo);
  if (mx == -std::numeric_limits<C>::infinity()) {
    std::fill(z, z + n, C(0));
    return C(1);
  }
  const C mn = std::max(m, mx);
  std::fill(z, z + lo, C(0));
  for (int64_t c = lo; c < hi; ++c) z[c] = codegen::math::exp(z[c] - mn);
  std::fill(z + hi, z + n, C(0));
  const C corr = codegen::math::exp(m - mn);  // 0 on the row's first visible scores
  l = l * corr + lane_sum<C>(n, [&](int64_t c) { return z[c]; });
  m = mn;
  return corr;
}
template <class C>
C online_softmax_row(C* z, int64_t n, C& m, C& l) {
  return online_softmax_row(z, n, m, l, Cols{0, n});
}

// The products' operand (O) of a block computed in C, for inputs stored as
// T: its rows x cols (row stride ld) rounded to T, as bf16 compute rounds
// the fused kernels' f32 intermediates (probabilities, gradients of logits)
// for their products: into `to` (same stride) where the operands are T,
// else in place (the block itself, where T is C untouched).
template <class T, class O, class C>
const O* as_operand(C* block, int64_t rows, int64_t cols, int64_t ld, O* to) {
  if constexpr (std::is_same_v<O, C>) {
    if constexpr (!std::is_same_v<T, C>)
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) block[r * ld + c] = C(T(block[r * ld + c]));
    return block;
  } else {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) to[r * ld + c] = O(block[r * ld + c]);
    return to;
  }
}

// Calls f.operator()<C, T, O>() for inputs stored as T: a fused kernel
// computing in C (codegen::compute_t: f32 for bf16 and f16) whose products
// take O operands: T where the CPU multiplies T natively (matmul_path.h;
// gemm.h accumulates in f32), else C, the inputs widened once (exact).
template <class F>
void by_operand_type(DType t, F&& f) {
  visit_floating(t, [&](auto tag) {
    using T = decltype(tag);
    using C = codegen::compute_t<T>;
    if constexpr (std::is_same_v<T, C>) {
      f.template operator()<C, T, T>();
    } else {
      if (matmul_path(t) == MatmulPath::onednn) f.template operator()<C, T, T>();
      else f.template operator()<C, T, C>();
    }
  });
}

// The block of the CPU's pool a Scratch<T>(n) takes (Kernel::scratch_bytes
// counts blocks).
template <class T>
int64_t scratch_block(int64_t n) {
  return int64_t(CachingAllocator::round_size(size_t(std::max<int64_t>(n, 1)) * sizeof(T)));
}

// Kernel::scratch_bytes of a by_operand_type kernel whose scratch is its
// inputs `Inputs` widened to O (AsCompute) where they are not stored as O.
template <size_t... Inputs>
int64_t widened_inputs_bytes(const PrepareArgs& a) {
  int64_t bytes = 0;
  by_operand_type(a.in[0].dtype, [&]<class C, class T, class O>() {
    for (size_t i : {Inputs...})
      if (!stored_as<O>(a.in[i].dtype)) bytes += scratch_block<O>(a.in[i].shape.numel());
  });
  return bytes;
}

}  // namespace kiln::cpu
