#include "kiln/train/profiler.h"

#include <filesystem>

#include "kiln/base/error.h"
#include "kiln/base/profile.h"
#include "kiln/io/chrome_trace.h"
#include "kiln/runtime/backend.h"

namespace kiln::train {

namespace fs = std::filesystem;

StepProfiler::StepProfiler(const TrainConfig& config, int rank, int world_size, Device device)
    : c_(config.profiler),
      folder_((fs::path(config.job.dump_folder) / config.profiler.save_traces_folder).string()),
      rank_(rank),
      world_size_(world_size),
      device_(device) {}

StepProfiler::~StepProfiler() {
  if (capturing_) profile::stop();
}

void StepProfiler::begin_step(int64_t step) {
  if (!c_.enable_profiling || capturing_) return;
  if ((step + c_.active_steps - 1) % c_.profile_freq != 0) return;
  profile::set_thread_name("main");
  profile::start();
  capturing_ = true;
}

std::string StepProfiler::end_step(int64_t step) {
  if (!capturing_ || step % c_.profile_freq != 0) return "";
  synchronize(device_);  // the step's kernels have run and are recorded
  profile::Capture capture = profile::stop();
  capturing_ = false;
  std::string path = trace_path(step);
  write_chrome_trace(path, capture, rank_, cat("kiln rank ", rank_));
  return path;
}

std::string StepProfiler::trace_path(int64_t step) const {
  return (fs::path(folder_) / cat("step-", step) /
          (world_size_ > 1 ? cat("rank", rank_, "_trace.json") : std::string("trace.json")))
      .string();
}

}  // namespace kiln::train
