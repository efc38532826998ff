// The device's peak FLOP rate, which MFU divides by: for a CPU the sustained
// GEMM rate `kiln bench peak` measured and cached (peak.json), for a GPU its
// dense bf16 peak from a table. Unknown is unknown: never a made-up number.
#pragma once
#include <filesystem>
#include <optional>
#include <string>

#include "kiln/base/dtype.h"
#include "kiln/runtime/device.h"

namespace kiln {

struct Peak {
  std::string cpu;         // model name from /proc/cpuinfo
  std::string onednn_isa;  // what oneDNN dispatched to
  int threads = 0;
  double bf16_gflops = 0;  // best over the measured shapes
  double f32_gflops = 0;
};

// $KILN_CACHE_DIR/peak.json, else $XDG_CACHE_HOME/kiln/peak.json, else
// ~/.cache/kiln/peak.json.
std::filesystem::path peak_cache_path();
void save_peak(const Peak& peak, const std::filesystem::path& path);
// The cached peak, or nothing when the file is absent or unreadable.
std::optional<Peak> load_peak(const std::filesystem::path& path);

struct DevicePeak {
  double flops = 0;    // per second, for the compute dtype
  std::string source;  // e.g. "measured GEMM peak (peak.json, 2 threads)", "H100 table"
};

// The peak for training in `compute` on `device`: a CPU's cached
// measurement (bf16 or f32; kiln bench peak), a GPU's table entry (bf16,
// matched on the name `describe` gives). Nothing when unknown.
std::optional<DevicePeak> device_peak(Device device, DType compute);

}  // namespace kiln
