// The trainer's profiler schedule (--profiler.*): for every multiple N of
// profile_freq, a capture of steps N-active_steps+1..N (steady state once
// N > active_steps), written when step N ends, after the device has finished
// its work, to <dump_folder>/<save_traces_folder>/step-N/trace.json
// (rank{R}_trace.json for each rank of a multi-process run). With
// enable_profiling off it records and writes nothing.
#pragma once
#include <cstdint>
#include <string>

#include "kiln/runtime/device.h"
#include "kiln/train/config.h"

namespace kiln::train {

class StepProfiler {
 public:
  StepProfiler(const TrainConfig& config, int rank, int world_size, Device device);
  ~StepProfiler();  // ends a capture still on (an error unwinding the loop), writing nothing
  StepProfiler(const StepProfiler&) = delete;
  StepProfiler& operator=(const StepProfiler&) = delete;

  // Call before the step runs: starts a capture where one is due.
  void begin_step(int64_t step);
  // Call once the step is done: at a capture's last step, waits for the
  // device, ends the capture and returns the trace's path ("" otherwise).
  std::string end_step(int64_t step);

  // Where step N's trace goes.
  std::string trace_path(int64_t step) const;

 private:
  ProfilerSection c_;
  std::string folder_;
  int rank_, world_size_;
  Device device_;
  bool capturing_ = false;
};

}  // namespace kiln::train
