// What the GPU benchmarks share: the CUDA error check (a failure exits, it
// is a benchmark), the timing rule (the best of kBatches batches, each of
// enough calls for about kBatchSeconds), CUDA-event timing, and the GPU
// time of kiln's work on cuda:0.
#pragma once
#include <cuda_runtime.h>

#include "kiln/backend/cuda/stream.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/tensor.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>

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

inline constexpr kiln::Device kCuda0{kiln::DeviceKind::cuda, 0};

// Runs a PyTorch counterpart in this folder (`script args`, with
// $KILN_PYTHON or python3) and returns its "torch KEY SECONDS" lines by
// key, echoing its other lines; empty (and said so) when torch or its GPU
// is unavailable.
inline std::map<std::string, double> torch_seconds(const std::string& script_and_args) {
  const char* py = std::getenv("KILN_PYTHON");
  const std::string cmd = std::string(py ? py : "python3") + " " KILN_BENCH_DIR "/" + script_and_args;
  std::map<std::string, double> out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char line[512], key[64];
  double s;
  while (std::fgets(line, sizeof line, p)) {
    if (std::sscanf(line, "torch %63s %lf", key, &s) == 2) out[key] = s;
    else std::printf("torch: %s", line);
  }
  if (pclose(p) != 0 || out.empty()) std::printf("torch: unavailable (%s failed)\n", cmd.c_str());
  return out;
}

// Records `e` on the stream kiln's cuda:0 work runs on, in queue order (so
// it lands between the ops enqueued before and after it).
inline void record_on_kiln_stream(cudaEvent_t e) {
  kiln::find_backend(kiln::DeviceKind::cuda)
      ->queue(0)
      .enqueue([e] { CHECK_CUDA(cudaEventRecord(e, kiln::cuda::current_stream())); },
               "bench: timing event");
}

// GPU seconds per call of step() on kiln's cuda:0 stream.
inline double kiln_seconds(const std::function<void()>& step) {
  EventPair ev;
  return best_seconds_per_call([&](int calls) {
    record_on_kiln_stream(ev.start);
    for (int i = 0; i < calls; ++i) step();
    record_on_kiln_stream(ev.end);
    kiln::synchronize(kCuda0);  // the queue has issued the end event
    return ev.seconds();
  });
}

}  // namespace bench
