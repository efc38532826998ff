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

// Runs cubin_for(source, arch) on the compile pool (runtime/compile_pool.h)
// unless it was started before in this process, and returns at once; a later
// cubin_for of the source waits for that compile only. Its errors are
// dropped here: the later cubin_for compiles again and raises them.
void start_cubin(const std::string& source, int arch);

// Since the process started: cubins start_cubin sent to the pool, and NVRTC
// compiles cubin_for ran (cache misses).
struct CubinStats {
  int64_t started = 0;
  int64_t compiled = 0;
};
CubinStats cubin_stats();

}  // namespace kiln::cuda::fused
