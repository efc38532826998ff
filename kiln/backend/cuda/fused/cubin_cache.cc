#include "kiln/backend/cuda/fused/cubin_cache.h"

#include <xxhash.h>

#include <atomic>
#include <mutex>
#include <unordered_set>

#include "kiln/backend/cuda/fused/nvrtc.h"
#include "kiln/base/error.h"
#include "kiln/runtime/compile_pool.h"

namespace kiln::cuda::fused {
namespace {

std::atomic<int64_t> g_started{0}, g_compiles{0};

const std::string& version() {
  static const std::string v = nvrtc_version();
  return v;
}

}  // namespace

CacheKey cubin_key(const std::string& source, int arch, const std::string& nvrtc_version) {
  std::string flags = cat("fused codegen | nvrtc ", nvrtc_version, " |");
  for (const std::string& o : nvrtc_options(arch)) flags += " " + o;
  // Two hashes of the source (128 bits against collisions), one of the flags.
  const ir::Fingerprint f{XXH64(source.data(), source.size(), 0), XXH64(source.data(), source.size(), 1),
                          XXH64(flags.data(), flags.size(), 0)};
  return {f, "cuda_fused_cubin"};
}

Cubin cubin_for(const std::string& source, int arch) {
  Cubin c{cubin_key(source, arch, version()), ""};
  c.bytes = CompileCache::instance().get_or_compile(c.key, [&] {
    ++g_compiles;
    return compile_cubin(source, ir::to_string(c.key.fingerprint) + ".cu", arch);
  });
  return c;
}

void start_cubin(const std::string& source, int arch) {
  static std::mutex mu;
  static auto* started = new std::unordered_set<std::string>;  // entry names; never freed, as the pool
  {
    std::lock_guard lock(mu);
    if (!started->insert(entry_name(cubin_key(source, arch, version()))).second) return;
  }
  ++g_started;
  submit_compile_job([source, arch] {
    try {
      cubin_for(source, arch);
    } catch (const std::exception&) {
      // Dropped: the kernel's call compiles again and raises it (see the header).
    }
  });
}

CubinStats cubin_stats() { return {g_started.load(), g_compiles.load()}; }

}  // namespace kiln::cuda::fused
