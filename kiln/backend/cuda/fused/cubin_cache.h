// Generated kernels' cubins in the tiered compile cache
// (kiln/runtime/compile_cache.h, kind "cuda_fused_cubin"), so a kernel is
// compiled once per host (L2) and reused across runs (L3).
#pragma once
#include <string>

#include "kiln/codegen/plan.h"
#include "kiln/runtime/compile_cache.h"

namespace kiln::cuda::fused {

// Keyed by the body, the generated source (which holds the layout and the
// embedded headers), the architecture, NVRTC's version and its options.
CacheKey cubin_key(const codegen::Plan& plan, const std::string& source, int arch,
                   const std::string& nvrtc_version);

// The cubin of `source` for sm_<arch> and its key: from the cache, or
// compiled by NVRTC (on the calling thread) and stored. Throws kiln::Error
// when NVRTC fails.
struct Cubin {
  CacheKey key;
  std::string bytes;
};
Cubin cubin_for(const codegen::Plan& plan, const std::string& source, int arch);

}  // namespace kiln::cuda::fused
