#include "kiln/backend/cuda/fused/cubin_cache.h"

#include <xxhash.h>

#include <atomic>

#include "kiln/backend/cuda/fused/nvrtc.h"
#include "kiln/base/error.h"

namespace kiln::cuda::fused {
namespace {

std::atomic<int64_t> g_compiles{0};

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
  static const std::string version = nvrtc_version();
  Cubin c{cubin_key(source, arch, version), ""};
  c.bytes = CompileCache::instance().get_or_compile(c.key, [&] {
    ++g_compiles;
    return compile_cubin(source, ir::to_string(c.key.fingerprint) + ".cu", arch);
  });
  return c;
}

int64_t nvrtc_compiles() { return g_compiles.load(); }

}  // namespace kiln::cuda::fused
