// The CPU's sustained GEMM peak: measured by `kiln bench peak` and cached as
// JSON so MFU can be reported against it later.
#pragma once
#include <filesystem>
#include <ostream>
#include <string>

namespace kiln::cli {

struct Peak {
  std::string cpu;         // model name from /proc/cpuinfo
  std::string onednn_isa;  // what oneDNN dispatched to
  int threads = 0;
  double bf16_gflops = 0;  // best over the measured shapes
  double f32_gflops = 0;
};

// Times a few large square and training-shaped GEMMs per dtype, logging
// each to `log`, and keeps the best.
Peak measure_peak(int threads, std::ostream& log);

// $KILN_CACHE_DIR/peak.json, else $XDG_CACHE_HOME/kiln/peak.json, else
// ~/.cache/kiln/peak.json.
std::filesystem::path peak_cache_path();
void save_peak(const Peak& peak, const std::filesystem::path& path);

}  // namespace kiln::cli
