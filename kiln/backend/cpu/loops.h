// Strided N-ary loops: the iteration engine of elementwise kernels, copies
// and casts. Operand 0 is the output; inputs may be any strided view
// (broadcast dimensions have stride 0). Dimensions that are contiguous for
// every operand are merged, so the common cases run as one flat loop.
#pragma once
#include <array>
#include <cstdint>
#include <cstring>
#include <utility>

#include "kiln/backend/cpu/parallel.h"
#include "kiln/backend/cpu/scalar.h"
#include "kiln/base/dtype.h"
#include "kiln/runtime/kernel.h"

namespace kiln::cpu {

template <size_t N>
struct StridedOperands {
  std::array<char*, N> data;
  std::array<Strides, N> strides;  // in bytes
  Shape shape;
};

template <size_t N>
StridedOperands<N> make_operands(const std::array<const TensorRef*, N>& refs) {
  StridedOperands<N> ops;
  ops.shape = refs[0]->shape;
  for (size_t k = 0; k < N; ++k) {
    ops.data[k] = static_cast<char*>(refs[k]->data);
    ops.strides[k] = refs[k]->strides;
    // Inputs with fewer dimensions broadcast from the right.
    int pad = ops.shape.size() - refs[k]->rank();
    Strides s = Dims::filled(ops.shape.size(), 0);
    for (int i = 0; i < refs[k]->rank(); ++i)
      s[pad + i] = refs[k]->shape[i] == 1 && ops.shape[pad + i] != 1
                       ? 0
                       : refs[k]->strides[i] * int64_t(itemsize(refs[k]->dtype));
    ops.strides[k] = s;
  }
  // Drop size-1 dims, then merge dim i into i+1 when every operand allows it.
  Shape shape;
  std::array<Strides, N> strides;
  for (int i = 0; i < ops.shape.size(); ++i) {
    if (ops.shape[i] == 1) continue;
    bool merge = shape.size() > 0;
    for (size_t k = 0; k < N && merge; ++k)
      merge = strides[k].back() == ops.strides[k][i] * ops.shape[i];
    if (merge) {
      int64_t n = shape.back();
      shape.erase(shape.size() - 1);
      shape.push_back(n * ops.shape[i]);
      for (size_t k = 0; k < N; ++k) {
        strides[k].erase(strides[k].size() - 1);
        strides[k].push_back(ops.strides[k][i]);
      }
    } else {
      shape.push_back(ops.shape[i]);
      for (size_t k = 0; k < N; ++k) strides[k].push_back(ops.strides[k][i]);
    }
  }
  if (shape.empty()) {
    shape.push_back(1);
    for (size_t k = 0; k < N; ++k) strides[k].push_back(0);
  }
  ops.shape = shape;
  ops.strides = strides;
  return ops;
}

// Calls row(ptrs, inner_strides, n) over runs of the innermost dimension,
// in parallel. ptrs point at the run's first element of each operand.
template <size_t N, class Row>
void for_each_row(const StridedOperands<N>& ops, Row&& row) {
  const int r = ops.shape.size();
  const int64_t inner = ops.shape[r - 1];
  const int64_t total = ops.shape.numel();
  std::array<int64_t, N> inner_strides;
  for (size_t k = 0; k < N; ++k) inner_strides[k] = ops.strides[k][r - 1];
  parallel_for(total, 1, [&](int64_t begin, int64_t end) {
    int64_t i = begin;
    while (i < end) {
      // Multi-index of element i.
      int64_t rest = i / inner, col = i % inner;
      std::array<char*, N> p = ops.data;
      for (int d = r - 2; d >= 0; --d) {
        int64_t idx = rest % ops.shape[d];
        rest /= ops.shape[d];
        for (size_t k = 0; k < N; ++k) p[k] += idx * ops.strides[k][d];
      }
      int64_t n = std::min(inner - col, end - i);
      for (size_t k = 0; k < N; ++k) p[k] += col * inner_strides[k];
      row(p, inner_strides, n);
      i += n;
    }
  });
}

template <class T>
inline compute_t<T> load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return widen(v);
}

template <class T, class C>
inline void store(char* p, C v) {
  T t = narrow<T>(v);
  std::memcpy(p, &t, sizeof(T));
}

// out[i] = f(in0[i], ...) with T_out / T_in storage types and compute types.
template <class Out, class... In, class F>
void map(const TensorRef& out, F f, const std::array<const TensorRef*, sizeof...(In)>& in) {
  constexpr size_t N = sizeof...(In) + 1;
  std::array<const TensorRef*, N> refs;
  refs[0] = &out;
  for (size_t k = 0; k < sizeof...(In); ++k) refs[k + 1] = in[k];
  auto ops = make_operands<N>(refs);
  for_each_row(ops, [&](const std::array<char*, N>& p, const std::array<int64_t, N>& s, int64_t n) {
    constexpr size_t sizes[N] = {sizeof(Out), sizeof(In)...};
    // Separate loop so the compiler vectorises the common case.
    auto dense_run = [&](std::array<char*, N> q, int64_t m) {  // q by value: not aliased by the stores
      [&]<size_t... K>(std::index_sequence<K...>) {
        for (int64_t i = 0; i < m; ++i)
          store<Out>(q[0] + i * sizeof(Out), f(load<In>(q[K + 1] + i * sizes[K + 1])...));
      }(std::index_sequence_for<In...>{});
    };
    // Inputs with one value along the row (stride 0: a per-row scale) are
    // read from a run of copies of it, so the row still runs dense.
    bool dense = s[0] == int64_t(sizes[0]), broadcast = false;
    for (size_t k = 1; k < N; ++k) {
      dense = dense && (s[k] == int64_t(sizes[k]) || s[k] == 0);
      broadcast = broadcast || s[k] == 0;
    }
    if (dense && !broadcast) {
      dense_run(p, n);
    } else if (dense) {
      constexpr int64_t kRun = 256;
      static_assert(((sizeof(In) <= sizeof(int64_t)) && ...));
      alignas(64) char copies[N][kRun * sizeof(int64_t)];
      std::array<char*, N> q = p;
      for (size_t k = 1; k < N; ++k) {
        if (s[k] != 0) continue;
        const size_t bytes = size_t(std::min(n, kRun)) * sizes[k];
        std::memcpy(copies[k], p[k], sizes[k]);
        for (size_t have = sizes[k]; have < bytes; have *= 2)  // doubling: few calls
          std::memcpy(copies[k] + have, copies[k], std::min(have, bytes - have));
        q[k] = copies[k];
      }
      for (int64_t at = 0; at < n; at += kRun) {
        std::array<char*, N> run = q;
        for (size_t k = 0; k < N; ++k)
          if (s[k] != 0) run[k] += at * s[k];
        dense_run(run, std::min(kRun, n - at));
      }
    } else {
      [&]<size_t... K>(std::index_sequence<K...>) {
        for (int64_t i = 0; i < n; ++i)
          store<Out>(p[0] + i * s[0], f(load<In>(p[K + 1] + i * s[K + 1])...));
      }(std::index_sequence_for<In...>{});
    }
  });
}

}  // namespace kiln::cpu
