// What a Chrome trace written by kiln's profiler says about the steps in it
// (`kiln profile summarize`): the ops that took the time, and where the
// device queue's time went. Each instant of the capture on the busiest
// device queue is attributed to the innermost span covering it:
//   compute        a kernel, or a program between its kernels;
//   communication  a collective kernel or a collective's wait;
//   host gaps      no device work while a step is running (the device waits
//                  on the host: dispatch, data, checkpoints);
//   idle           no device work and no step running.
// The four shares add up to 100%.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kiln {

struct OpTime {
  std::string name;
  int64_t calls = 0;
  double total_us = 0, flops = 0, bytes = 0;
};

struct TraceSummary {
  std::string device_thread;  // the device queue's track
  int64_t steps = 0;          // "step" spans in the trace
  double window_us = 0;       // the capture
  double compute_us = 0, communication_us = 0, host_gap_us = 0, idle_us = 0;
  std::vector<OpTime> ops;  // kernels and collectives by name, most time first
};

// Throws kiln::Error naming what is missing or malformed in `trace`.
TraceSummary summarize_trace(const nlohmann::json& trace);
// The report `kiln profile summarize` prints: the shares, then the `top` ops.
std::string format_summary(const TraceSummary& s, size_t top);
nlohmann::json summary_json(const TraceSummary& s);

}  // namespace kiln
