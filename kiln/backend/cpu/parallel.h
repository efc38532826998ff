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

// Runs f with OpenMP's team size for the calling thread at one (restored
// after, also when f throws): oneDNN sizes its split by it, and one thread
// keeps a product's summation order fixed. Inside a parallel region it is
// one already.
template <class F>
void on_one_thread(F&& f) {
  struct Restore {
    int saved = omp_get_max_threads();
    ~Restore() {
      if (saved != 1) omp_set_num_threads(saved);
    }
  } restore;
  if (restore.saved != 1) omp_set_num_threads(1);
  f();
}

// The least work, in inner-loop iterations (elements or multiply-adds), worth
// a chunk of its own: tens of microseconds, more than waking a sleeping
// OpenMP thread (apps/kiln/wait_policy.cc) and joining it again costs, so
// smaller loops run faster whole on the calling thread.
inline constexpr int64_t kMinChunkWork = 32768;

// How many chunks parallel_for cuts n indices of `cost` work each into: 1
// (the calling thread alone) when there is not enough work for two threads.
inline int64_t parallel_chunks(int64_t n, int64_t cost, int threads) {
  if (n <= 1 || threads == 1) return 1;
  int64_t work = n * std::max<int64_t>(cost, 1);
  int64_t chunks = std::min<int64_t>(work / kMinChunkWork, int64_t(threads) * 4);
  return std::clamp<int64_t>(chunks, 1, n);
}

// Calls f(begin, end) over [0, n), where each index costs about `cost`
// inner-loop iterations: in one call on the calling thread when there is less
// than 2 * kMinChunkWork of work, else in a chunk per kMinChunkWork, at most
// 4 per thread.
template <class F>
void parallel_for(int64_t n, int64_t cost, F&& f) {
  if (n <= 0) return;
  int threads = use_threads();
  int64_t chunks = parallel_chunks(n, cost, threads);
  if (chunks == 1) {
    f(int64_t{0}, n);
    return;
  }
  int64_t per = (n + chunks - 1) / chunks;
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t c = 0; c < chunks; ++c) {
    int64_t b = c * per, e = std::min(n, b + per);
    if (b < e) f(b, e);
  }
}

}  // namespace kiln::cpu
