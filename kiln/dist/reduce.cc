#include "kiln/dist/reduce.h"

#include <algorithm>
#include <type_traits>

#include "kiln/base/error.h"

namespace kiln::dist {
namespace {

// The type a T accumulates in: f32 for the 16-bit floats, else T itself.
template <class T>
using acc_t = std::conditional_t<std::is_same_v<T, bf16> || std::is_same_v<T, f16>, float, T>;

template <class A>
A combine(A a, A b, ReduceOp op) {
  if (op == ReduceOp::max) {
    if constexpr (std::is_floating_point_v<A>) return (a >= b || a != a) ? a : b;  // NaN wins
    else return std::max(a, b);
  }
  if constexpr (std::is_integral_v<A>) {
    // Integer sums wrap, as two's complement hardware does (no UB).
    using U = std::make_unsigned_t<A>;
    return A(U(a) + U(b));
  } else {
    return a + b;
  }
}

template <class T>
void reduce_typed(T* out, std::span<const void* const> parts, int64_t count, ReduceOp op) {
  using A = acc_t<T>;
  // Blocks keep the accumulator in cache and the inner loops vectorisable.
  constexpr int64_t kBlock = 1024;
  A acc[kBlock];
  for (int64_t b = 0; b < count; b += kBlock) {
    int64_t n = std::min(kBlock, count - b);
    const T* first = static_cast<const T*>(parts[0]) + b;
    for (int64_t i = 0; i < n; ++i) acc[i] = A(first[i]);
    for (size_t p = 1; p < parts.size(); ++p) {
      const T* part = static_cast<const T*>(parts[p]) + b;
      for (int64_t i = 0; i < n; ++i) acc[i] = combine(acc[i], A(part[i]), op);
    }
    if constexpr (std::is_floating_point_v<A>)
      if (op == ReduceOp::avg)
        for (int64_t i = 0; i < n; ++i) acc[i] /= A(parts.size());
    for (int64_t i = 0; i < n; ++i) out[b + i] = T(acc[i]);
  }
}

}  // namespace

void reduce_in_order(void* out, std::span<const void* const> parts, int64_t count, DType dtype,
                     ReduceOp op) {
  KILN_CHECK(!parts.empty(), "reduce_in_order: nothing to reduce");
  visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>)
      fail("cannot reduce bool buffers; convert them to an integer dtype");
    else
      reduce_typed<T>(static_cast<T*>(out), parts, count, op);
  });
}

}  // namespace kiln::dist
