// The device's peak FLOP rate, which MFU divides by: for a CPU a sustained
// GEMM rate measured on this machine and cached (peak.json), for a GPU its
// dense bf16 peak from a table. Unknown is unknown: never a made-up number.
#pragma once
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kiln/base/dtype.h"
#include "kiln/runtime/device.h"

namespace kiln {

// One measurement. It holds for the CPU model, GEMM ISA and thread count it
// was taken with, and for no other; and for the kiln build that took it,
// as that build's matmuls are what it timed (a faster GEMM in a later build
// would otherwise leave MFU divided by the old, lower rate).
struct Peak {
  std::string cpu;         // model name from /proc/cpuinfo
  std::string onednn_isa;  // what oneDNN dispatched to
  int threads = 0;
  std::string build;  // kiln_build_id() of the build that measured
  double bf16_gflops = 0;  // best over the measured shapes; 0: not measured
  double f32_gflops = 0;
  std::string method;  // "quick" (the trainer, on first use) or "thorough" (kiln bench peak)
  double seconds = 0;  // how long measuring took
};

double peak_gflops(const Peak& p, DType compute);  // 0 when not measured

// $KILN_CACHE_DIR/peak.json, else $XDG_CACHE_HOME/kiln/peak.json, else
// ~/.cache/kiln/peak.json.
std::filesystem::path peak_cache_path();
// Every measurement in the file; none when it is absent or unreadable.
std::vector<Peak> load_peaks(const std::filesystem::path& path);
// Adds `peak` to the file atomically, replacing the measurement taken with
// the same CPU model, ISA and thread count (by any build).
void save_peak(const Peak& peak, const std::filesystem::path& path);

// How a peak was found for a run: cached, or measured now (and cached).
struct PeakLookup {
  Peak peak;
  bool measured_now = false;
  std::string cache_error;  // why a new measurement could not be cached
};

// The cached measurement for `key`'s CPU, ISA, thread count and build that
// has `compute`; else `measure()`, saved to `path`. Processes sharing the cache
// take turns (a lock file beside it), so concurrent runs measure once and
// not against each other. An unreadable file is measured over; an
// unwritable one leaves the measurement uncached (cache_error says why).
PeakLookup cached_or_measured_peak(const std::filesystem::path& path, const Peak& key,
                                   DType compute, const std::function<Peak()>& measure);

struct DevicePeak {
  double flops = 0;    // per second, for the compute dtype
  std::string source;  // what it is and where it came from, for the run's header
};

// A GPU's dense peak for `compute` (bf16 on the tensor cores, f32 on the
// CUDA cores: kiln's f32 GEMMs use no TF32) from the vendors' data sheets,
// matched on the words of the name its driver gives ("NVIDIA H100 PCIe").
// Nothing for another dtype or an unknown part.
std::optional<DevicePeak> data_sheet_peak(const std::string& gpu_name, DType compute);
// data_sheet_peak of `device`'s name; nothing for a CPU.
std::optional<DevicePeak> table_peak(Device device, DType compute);

}  // namespace kiln
