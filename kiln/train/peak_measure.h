// Measuring a CPU's GEMM peak: one implementation with two budgets, the
// thorough one for `kiln bench peak` and a quick one (about a second) that
// the trainer takes on first use, so MFU is known from the first run.
#pragma once
#include <optional>
#include <ostream>
#include <vector>

#include "kiln/train/gemm_timing.h"
#include "kiln/train/peak.h"

namespace kiln::train {

struct PeakBudget {
  const char* method;            // recorded with the measurement
  std::vector<GemmSpec> shapes;  // timed in each of bf16 and f32 (their dtype is ignored)
  // No GEMM after the first is started that would end past this (judged by
  // the one before); 0: no limit.
  double max_seconds = 0;
};

// Large square and MLP-shaped products, a few seconds per dtype.
PeakBudget thorough_peak_budget();
// The MLP's two projections at 1024 tokens, briefly timed, within 1.5 s
// (but for one GEMM that takes longer).
PeakBudget quick_peak_budget();

// This CPU's best GEMM rate in bf16 and f32 on `threads` kernel threads,
// `first` timed first (the dtype a run needs); each GEMM logged to `log`.
// The rate is per CPU second of the threads (GemmTiming::busy_gflops), so a
// peak measured while other processes hold some cores is not too low (which
// would put MFU above 100%).
Peak measure_peak(const PeakBudget& budget, int threads, DType first, std::ostream* log);

// The peak MFU divides by for a run on `device` computing in `compute` on
// `threads` kernel threads: a GPU's table entry; for a CPU the cached
// measurement for this CPU model, ISA and thread count, else a quick one
// taken now and cached. Its source says which.
std::optional<DevicePeak> run_peak(Device device, DType compute, int threads);

// A GPU's measured GEMM rate in `dtype`, TFLOP/s: kiln's matmul (cuBLASLt)
// on the 8192^3 product, briefly timed; `kiln info` prints it beside the
// data sheet's peak, which MFU divides by.
double measured_gemm_tflops(Device device, DType dtype);

}  // namespace kiln::train
