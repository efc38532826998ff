#include "kiln/train/peak.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kiln/base/error.h"
#include "kiln/io/atomic_file.h"
#include "kiln/runtime/backend.h"

namespace kiln {
namespace {

bool same_machine(const Peak& a, const Peak& b) {
  return a.cpu == b.cpu && a.onednn_isa == b.onednn_isa && a.threads == b.threads;
}

nlohmann::json to_json(const Peak& p) {
  return {{"cpu", p.cpu},           {"onednn_isa", p.onednn_isa},   {"threads", p.threads},
          {"build", p.build},       {"bf16_gflops", p.bf16_gflops}, {"f32_gflops", p.f32_gflops},
          {"method", p.method},     {"seconds", p.seconds}};
}

// Holds an exclusive flock on "<path>.lock" while it lives; without a
// writable directory it holds nothing (the run then measures unlocked).
class CacheLock {
 public:
  explicit CacheLock(const std::filesystem::path& path) {
    std::error_code ec;
    std::filesystem::create_directories(path.parent_path(), ec);
    std::string lock = path.string() + ".lock";
    fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ >= 0) ::flock(fd_, LOCK_EX);
  }
  ~CacheLock() {
    if (fd_ >= 0) ::close(fd_);  // releases the lock
  }
  CacheLock(const CacheLock&) = delete;
  CacheLock& operator=(const CacheLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace

double peak_gflops(const Peak& p, DType compute) {
  if (compute == DType::bf16) return p.bf16_gflops;
  if (compute == DType::f32) return p.f32_gflops;
  return 0;
}

std::filesystem::path peak_cache_path() {
  // The same directory as the compile cache's persistent tier.
  auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return std::string(v ? v : "");
  };
  if (std::string dir = env("KILN_CACHE_DIR"); !dir.empty())
    return std::filesystem::path(dir) / "peak.json";
  if (std::string xdg = env("XDG_CACHE_HOME"); !xdg.empty() && xdg.front() == '/')
    return std::filesystem::path(xdg) / "kiln" / "peak.json";
  std::string home = env("HOME");
  KILN_CHECK(!home.empty(), "cannot place the peak cache: set KILN_CACHE_DIR or HOME");
  return std::filesystem::path(home) / ".cache" / "kiln" / "peak.json";
}

std::vector<Peak> load_peaks(const std::filesystem::path& path) {
  std::ifstream f(path);
  if (!f) return {};
  nlohmann::json j = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("measurements") || !j["measurements"].is_array()) return {};
  std::vector<Peak> out;
  for (const nlohmann::json& e : j["measurements"]) {
    try {  // a field of the wrong type makes the entry unusable, not the run fail
      Peak p;
      p.cpu = e.value("cpu", "");
      p.onednn_isa = e.value("onednn_isa", "");
      p.threads = e.value("threads", 0);
      p.build = e.value("build", "");
      p.bf16_gflops = e.value("bf16_gflops", 0.0);
      p.f32_gflops = e.value("f32_gflops", 0.0);
      p.method = e.value("method", "");
      p.seconds = e.value("seconds", 0.0);
      if (!p.cpu.empty() && p.threads > 0) out.push_back(p);
    } catch (const nlohmann::json::exception&) {
    }
  }
  return out;
}

void save_peak(const Peak& peak, const std::filesystem::path& path) {
  nlohmann::json list = nlohmann::json::array();
  for (const Peak& p : load_peaks(path))
    if (!same_machine(p, peak)) list.push_back(to_json(p));
  list.push_back(to_json(peak));
  nlohmann::json j = {{"kiln_version", KILN_VERSION}, {"measurements", list}};
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  try {
    write_file_atomic(path.string(), j.dump(2) + "\n");
  } catch (const Error& e) {
    fail(e.what(), "; set KILN_CACHE_DIR to a writable directory");
  }
}

PeakLookup cached_or_measured_peak(const std::filesystem::path& path, const Peak& key,
                                   DType compute, const std::function<Peak()>& measure) {
  CacheLock lock(path);  // a run that waited here finds the other's measurement
  for (const Peak& p : load_peaks(path))
    if (same_machine(p, key) && p.build == key.build && peak_gflops(p, compute) > 0) return {p};
  PeakLookup r{measure(), true};
  try {
    save_peak(r.peak, path);
  } catch (const Error& e) {
    r.cache_error = e.what();
  }
  return r;
}

std::optional<DevicePeak> data_sheet_peak(const std::string& gpu_name, DType compute) {
  if (compute != DType::bf16 && compute != DType::f32) return std::nullopt;
  // Dense TFLOP/s (half the "with sparsity" figures); 0: not on the data
  // sheet. A variant's line comes before its model's.
  struct Entry {
    const char *model, *variant, *part;
    double bf16, f32;
  };
  static const Entry table[] = {
      {"B200", "", "B200", 2250, 0},
      {"H200", "NVL", "H200 NVL", 835, 60},
      {"H200", "", "H200 SXM", 989, 67},
      {"GH200", "", "GH200", 989, 67},
      {"H100", "PCIe", "H100 PCIe", 756, 51},
      {"H100", "NVL", "H100 NVL", 835, 60},
      {"H100", "", "H100 SXM", 989, 67},
      {"A100", "", "A100", 312, 19.5},
      {"L40S", "", "L40S", 362, 91.6},
      {"L40", "", "L40", 181, 90.5},
      {"L4", "", "L4", 121, 30.3},
      {"A10", "", "A10", 125, 31.2},
  };
  std::vector<std::string> words;
  for (size_t i = 0; i < gpu_name.size();) {
    size_t j = gpu_name.find_first_of(" -_", i);
    if (j == std::string::npos) j = gpu_name.size();
    if (j > i) words.push_back(gpu_name.substr(i, j - i));
    i = j + 1;
  }
  auto has = [&](const char* w) { return std::find(words.begin(), words.end(), w) != words.end(); };
  for (const Entry& e : table) {
    if (!has(e.model) || (*e.variant && !has(e.variant))) continue;
    const double tflops = compute == DType::bf16 ? e.bf16 : e.f32;
    if (tflops <= 0) return std::nullopt;
    return DevicePeak{tflops * 1e12, cat(tflops, " TFLOP/s ", e.part, " dense ",
                                         dtype_name(compute), " peak (data sheet)")};
  }
  return std::nullopt;
}

std::optional<DevicePeak> table_peak(Device device, DType compute) {
  if (device.kind == DeviceKind::cpu) return std::nullopt;
  Backend* b = find_backend(device.kind);
  if (!b) return std::nullopt;
  return data_sheet_peak(b->model(device.index), compute);
}

}  // namespace kiln
