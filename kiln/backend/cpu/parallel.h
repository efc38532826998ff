// Parallel loops for CPU kernels. parallel_for splits independent work
// (each output computed whole by one thread), so its results never depend on
// the thread count; reductions combine partials in a fixed order instead.
#pragma once
#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "kiln/runtime/threads.h"

namespace kiln::cpu {

// Sets OpenMP's team size for the calling thread to kiln's setting (oneDNN
// reads it too) and returns it.
inline int use_threads() {
  int n = num_threads();
  if (omp_get_max_threads() != n) omp_set_num_threads(n);
  return n;
}

// Calls f(begin, end) over [0, n) in chunks of at least `grain` elements.
template <class F>
void parallel_for(int64_t n, int64_t grain, F&& f) {
  if (n <= 0) return;
  int threads = use_threads();
  if (n <= grain || threads == 1) {
    f(int64_t{0}, n);
    return;
  }
  int64_t chunks = std::min<int64_t>((n + grain - 1) / grain, int64_t(threads) * 4);
  int64_t per = (n + chunks - 1) / chunks;
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t c = 0; c < chunks; ++c) {
    int64_t b = c * per, e = std::min(n, b + per);
    if (b < e) f(b, e);
  }
}

}  // namespace kiln::cpu
