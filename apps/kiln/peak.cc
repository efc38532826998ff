#include "apps/kiln/peak.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>

#include "apps/kiln/gemm_timing.h"
#include "kiln/backend/cpu/cpu_features.h"
#include "kiln/base/error.h"

namespace kiln::cli {

Peak measure_peak(int threads, std::ostream& log) {
  Peak p{cpu::cpu_model(), cpu::onednn_isa(), threads};
  // A large square product and the two projection shapes of a transformer
  // MLP as a Linear runs them (x @ W^T): tokens x d_ff x d_model and back.
  const GemmSpec shapes[] = {{2048, 2048, 2048},
                             {4096, 3072, 768, DType::f32, false, true},
                             {4096, 768, 3072, DType::f32, false, true}};
  for (DType dtype : {DType::bf16, DType::f32}) {
    double& best = dtype == DType::bf16 ? p.bf16_gflops : p.f32_gflops;
    for (GemmSpec s : shapes) {
      s.dtype = dtype;
      s.threads = threads;
      double g = time_gemm(s).gflops;
      log << "  " << describe(s) << ": " << std::fixed << std::setprecision(1) << g << " GFLOP/s\n"
          << std::flush;
      best = std::max(best, g);
    }
  }
  return p;
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

}  // namespace kiln::cli
