// What the GPU benchmarks share: the CUDA error check (a failure exits, it
// is a benchmark), the timing rule (the best of kBatches batches, each of
// enough calls for about kBatchSeconds) and CUDA-event timing.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>

#define CHECK_CUDA(call)                                                      \
  do {                                                                        \
    cudaError_t e_ = (call);                                                  \
    if (e_ != cudaSuccess) {                                                  \
      std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                           \
    }                                                                         \
  } while (0)

namespace bench {

inline constexpr double kBatchSeconds = 0.2;
inline constexpr int kBatches = 5;

// run(calls) returns the seconds of `calls` calls; warms up first.
inline double best_seconds_per_call(const std::function<double(int)>& run) {
  run(3);
  double warm = run(3) / 3;
  int calls = std::max(1, std::min(10000, int(kBatchSeconds / warm)));
  double best = 1e30;
  for (int b = 0; b < kBatches; ++b) best = std::min(best, run(calls) / calls);
  return best;
}

// Two events bracketing GPU work on a stream.
struct EventPair {
  cudaEvent_t start, end;
  EventPair() {
    CHECK_CUDA(cudaEventCreate(&start));
    CHECK_CUDA(cudaEventCreate(&end));
  }
  ~EventPair() {
    cudaEventDestroy(start);
    cudaEventDestroy(end);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  // Seconds from start to end; waits for end.
  double seconds() const {
    CHECK_CUDA(cudaEventSynchronize(end));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, start, end));
    return double(ms) / 1e3;
  }
};

}  // namespace bench
