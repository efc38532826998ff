// NVRTC, CUDA's run-time compiler: CUDA C source to a cubin for one GPU
// architecture. It needs no GPU and no driver (only libnvrtc), so kernels are
// generated and compiled, and their compile tested, on any machine with the
// toolkit.
#pragma once
#include <string>
#include <vector>

namespace kiln::cuda::fused {

// "13.0": part of every cubin's cache key.
std::string nvrtc_version();

// The NVRTC options a kernel is compiled with for architecture sm_<arch>
// (90 for H100/H200): --fmad=false keeps a multiply feeding an add two
// roundings, as on the CPU and in kiln's .cu files; IEEE division and square
// root and no flushing of denormals (NVRTC's defaults, stated) make those
// operations the CPU's bits.
std::vector<std::string> nvrtc_options(int arch);

// Compiles `source` (named `name` in diagnostics) for sm_<arch> and returns
// the cubin. Throws kiln::Error with NVRTC's log on failure, and once the
// process is exiting (exit waits for the compiles already running).
std::string compile_cubin(const std::string& source, const std::string& name, int arch);

}  // namespace kiln::cuda::fused
