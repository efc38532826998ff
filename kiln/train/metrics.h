// Training metrics, three ways: one readable line per logged step (plus a
// progress bar with ETA when stderr is a terminal), <dump_folder>/
// metrics.jsonl (one object per logged step, losses with full precision),
// and TensorBoard event files.
#pragma once
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "kiln/train/tensorboard.h"

namespace kiln::train {

// How an MoE model's routers spread one step's tokens (every rank's).
struct ExpertLoad {
  std::vector<int64_t> tokens_per_expert;  // summed over the MoE layers
  double max_load_ratio = 1;  // the busiest expert's tokens / the mean, in the worst layer
  int64_t dropped = 0;        // assignments the capacity dispatcher dropped
};
// From the step's [layer][expert] counts.
ExpertLoad expert_load(const std::vector<std::vector<int64_t>>& tokens, int64_t dropped);

struct StepMetrics {
  int64_t step = 0;
  double loss = 0;
  double grad_norm = 0;
  double lr = 0;
  double tps = 0;                           // tokens per second over the logging window
  double tflops = 0;                        // achieved TFLOP/s (flops_per_token x tps / 1e12)
  std::optional<double> mfu;                // fraction of the device peak; unknown peak: nothing
  int64_t mem_peak_bytes = 0;               // allocator high-water mark over the window
  // The offload pool's high-water mark (activation_checkpoint.mode offload).
  std::optional<int64_t> mem_offload_peak_bytes;
  std::optional<double> val_loss, val_ppl;  // at validation steps
  // Chat data: the step's training targets (its assistant tokens) over
  // every rank, the tokens the loss is taken on.
  std::optional<int64_t> targets;
  std::optional<ExpertLoad> moe;            // MoE models
};

struct MetricsOptions {
  std::string dump_folder;
  int64_t total_steps = 0;
  int64_t log_freq = 10;
  bool enable_tensorboard = true;
  std::string tb_folder = "tb";  // relative to dump_folder
  bool progress_bar = true;      // drawn only when stderr is a terminal
};

class MetricsLogger {
 public:
  // Opens <dump_folder>/metrics.jsonl for appending. A resumed run
  // (start_step > 0) first drops the lines of steps after start_step, which
  // an interrupted run logged past its last checkpoint.
  MetricsLogger(const MetricsOptions& options, int64_t start_step, std::ostream& out);
  ~MetricsLogger();
  MetricsLogger(const MetricsLogger&) = delete;
  MetricsLogger& operator=(const MetricsLogger&) = delete;

  // Steps whose metrics are logged: every log_freq-th, the first of the run and the last.
  bool should_log(int64_t step) const;
  void log(const StepMetrics& m);
  // Redraws the progress bar after `step` completed (a no-op off a terminal).
  void progress(int64_t step);
  // Prints a line (e.g. "saved checkpoint ...") without breaking the bar.
  void note(const std::string& line);

  std::string jsonl_path() const;
  const EventWriter* tensorboard() const { return tb_.get(); }

 private:
  void clear_bar();

  MetricsOptions options_;
  int64_t start_step_;
  std::ostream& out_;
  std::FILE* jsonl_ = nullptr;
  std::unique_ptr<EventWriter> tb_;
  bool tty_ = false, bar_shown_ = false;
  std::chrono::steady_clock::time_point started_;
};

// The JSONL line of `m` (without the newline): keys step, loss, grad_norm,
// lr, tps, tflops, mfu (null when unknown), mem_peak_bytes,
// mem_offload_peak_bytes under activation offload, val_loss, val_ppl when evaluated, and for MoE models moe_tokens_per_expert,
// moe_max_load_ratio, moe_dropped; floating values printed with %.17g.
std::string metrics_json(const StepMetrics& m);
// The human-readable line of `m`.
std::string metrics_line(const StepMetrics& m);

}  // namespace kiln::train
