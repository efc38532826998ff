// Times kiln's own matmul, as training calls it: through the Tensor API, on
// the device queue, synchronising after each timed batch of calls. Shared by
// `kiln bench gemm|peak` and the trainer's quick peak measurement.
#pragma once
#include <cstdint>
#include <string>

#include "kiln/base/dtype.h"
#include "kiln/runtime/device.h"

namespace kiln::train {

struct GemmSpec {
  int64_t m = 0, n = 0, k = 0;
  DType dtype = DType::f32;
  bool ta = false;  // A stored [K,M]
  bool tb = false;  // B stored [N,K] (a Linear weight)
  int threads = 2;
  int iters = 0;  // calls per timed batch; 0: enough for about batch_seconds
  int batches = 5;  // timed batches; the best one counts
  double batch_seconds = 0.2;
  Device device = kCPU;
};

struct GemmTiming {
  double seconds = 0;  // per call, best batch
  double gflops = 0;   // 2*M*N*K / seconds, in 1e9/s
  // As if the threads had kept their cores: per call, the best batch's
  // process CPU time over the thread count (at most its wall time). Other
  // processes taking the cores lower gflops, not busy_gflops.
  double busy_seconds = 0;
  double busy_gflops = 0;
  double cpu_share = 0;  // the process's CPU time over threads x wall time, all batches
  int iters = 0;
  int batches = 0;
};

// "4096x768x3072 bf16 NT" (M x N x K, dtype, A and B transposed or not).
std::string describe(const GemmSpec& s);
GemmTiming time_gemm(const GemmSpec& s);

}  // namespace kiln::train
