#include "kiln/backend/cuda/fused/cubin_cache.h"

#include <xxhash.h>

#include "kiln/backend/cuda/fused/nvrtc.h"
#include "kiln/base/error.h"
#include "kiln/ir/fingerprint.h"

namespace kiln::cuda::fused {

CacheKey cubin_key(const codegen::Plan& plan, const std::string& source, int arch,
                   const std::string& nvrtc_version) {
  const uint64_t h = XXH64(source.data(), source.size(), 0);
  std::string flags = cat("fused codegen | nvrtc ", nvrtc_version, " |");
  for (const std::string& o : nvrtc_options(arch)) flags += " " + o;
  return {ir::fingerprint(plan.graph, {"cuda", cat(flags, " | source ", h)}), "cuda_fused_cubin"};
}

Cubin cubin_for(const codegen::Plan& plan, const std::string& source, int arch) {
  static const std::string version = nvrtc_version();
  Cubin c{cubin_key(plan, source, arch, version), ""};
  c.bytes = CompileCache::instance().get_or_compile(
      c.key, [&] { return compile_cubin(source, ir::to_string(c.key.fingerprint) + ".cu", arch); });
  return c;
}

}  // namespace kiln::cuda::fused
