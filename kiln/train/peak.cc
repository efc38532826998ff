#include "kiln/train/peak.h"

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kiln/base/error.h"
#include "kiln/runtime/backend.h"

namespace kiln {

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

void save_peak(const Peak& p, const std::filesystem::path& path) {
  nlohmann::json j = {{"cpu", p.cpu},
                      {"onednn_isa", p.onednn_isa},
                      {"threads", p.threads},
                      {"bf16_gflops", p.bf16_gflops},
                      {"f32_gflops", p.f32_gflops},
                      {"kiln_version", KILN_VERSION}};
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  // Written beside the target and renamed, so readers never see half a file.
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream f(tmp);
    f << j.dump(2) << "\n";
    KILN_CHECK(f.good(), "cannot write ", tmp.string(),
               "; set KILN_CACHE_DIR to a writable directory");
  }
  std::filesystem::rename(tmp, path, ec);
  KILN_CHECK(!ec, "cannot write ", path.string(), ": ", ec.message());
}

std::optional<Peak> load_peak(const std::filesystem::path& path) {
  std::ifstream f(path);
  if (!f) return std::nullopt;
  nlohmann::json j = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  Peak p;
  p.cpu = j.value("cpu", "");
  p.onednn_isa = j.value("onednn_isa", "");
  p.threads = j.value("threads", 0);
  p.bf16_gflops = j.value("bf16_gflops", 0.0);
  p.f32_gflops = j.value("f32_gflops", 0.0);
  return p;
}

std::optional<DevicePeak> device_peak(Device device, DType compute) {
  if (device.kind == DeviceKind::cpu) {
    std::optional<Peak> p;
    try {
      p = load_peak(peak_cache_path());
    } catch (const Error&) {  // no place for a cache: nothing was measured
    }
    if (!p) return std::nullopt;
    double gflops = compute == DType::bf16 ? p->bf16_gflops : p->f32_gflops;
    if (gflops <= 0) return std::nullopt;
    return DevicePeak{gflops * 1e9, cat("measured ", dtype_name(compute), " GEMM peak, ",
                                        p->threads, " threads (kiln bench peak)")};
  }
  if (compute != DType::bf16) return std::nullopt;
  // Dense bf16 tensor-core peaks from the vendors' data sheets (SXM parts).
  struct Entry {
    const char* name;
    double tflops;
  };
  static const Entry table[] = {{"B200", 2250}, {"H200", 989}, {"H100", 989}, {"A100", 312},
                                {"L40S", 362},  {"L4", 121},   {"A10", 125}};
  Backend* b = find_backend(device.kind);
  if (!b) return std::nullopt;
  std::string name = b->describe(device.index);
  for (const Entry& e : table)
    if (name.find(e.name) != std::string::npos)
      return DevicePeak{e.tflops * 1e12, cat(e.name, " dense bf16 peak (table)")};
  return std::nullopt;
}

}  // namespace kiln
