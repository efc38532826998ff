// Generated kernels' cubins in the tiered compile cache
// (kiln/runtime/compile_cache.h, kind "cuda_fused_cubin"), so a kernel is
// compiled once per host (L2) and reused across runs (L3).
#pragma once
#include <cstdint>
#include <string>

#include "kiln/runtime/compile_cache.h"

namespace kiln::cuda::fused {

// Keyed by the generated source (which holds the body's ops and dtypes, the
// layout when specialised, and the embedded headers), the architecture,
// NVRTC's version and its options; not by the body's graph, so the one
// shape-generic source of bodies of every shape is one entry.
CacheKey cubin_key(const std::string& source, int arch, const std::string& nvrtc_version);

// The cubin of `source` for sm_<arch> and its key: from the cache, or
// compiled by NVRTC (on the calling thread) and stored; a caller asking for
// a cubin another thread is compiling waits for that one. Throws kiln::Error
// when NVRTC fails.
struct Cubin {
  CacheKey key;
  std::string bytes;
};
Cubin cubin_for(const std::string& source, int arch);

// NVRTC compiles run by cubin_for since the process started (cache misses).
int64_t nvrtc_compiles();

}  // namespace kiln::cuda::fused
