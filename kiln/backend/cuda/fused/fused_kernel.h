// The CUDA kernel of op "fused" (the compiler-made fused groups of
// kiln/compiler/fuse.h), registered with strided inputs; the elementwise and
// reduction ops' CUDA kernels (../elementwise.cc, ../reduction.cc) run
// their op as a one-node body through the same path, so every elementwise
// and reduction kernel on CUDA is generated code (codegen.h).
//
// A body is planned once (codegen/plan.h). A fused node called in its
// natural layout runs kernels specialised for it; eager ops, and fused nodes
// called in another layout, run the shape-generic kernels (codegen.h), one
// per (ops, dtypes, rank, walk) whatever the sizes. Kernels are compiled by
// NVRTC for the device's architecture and stored in the tiered compile
// cache (cubin_cache.h), then loaded once per device (module.h). There is no
// interpreter on the device, so a call waits for its kernel; the kernels'
// prepare hooks (runtime/kernel.h), which a compiled program's constructor
// calls, start every node's compile early and in parallel on the compile
// pool, and a call waits only for its own. A kernel not prepared compiles at
// its first call, on the device's queue thread, where kernels run, while the
// host thread that records ops goes on and the GPU runs the work already on
// the stream. Later calls, and later processes (the cache's L2 and L3), do
// not compile.
#pragma once
#include <span>
#include <string>

#include "kiln/backend/cuda/fused/codegen.h"
#include "kiln/runtime/kernel.h"

namespace kiln::cuda::fused {

// Runs the body (IR text; kind "elementwise" or "reduction") over these
// device buffers on the calling thread's device and stream. Errors in the
// body or the buffers are kiln::Errors naming what is wrong.
void run_body(const std::string& body, const std::string& kind, std::span<const TensorRef> in,
              std::span<const TensorRef> out);

// Runs a kernel's op as the body of that one node (kind "elementwise" or
// "reduction"), typed as the kernel's buffers.
void run_op(const KernelArgs& a, const std::string& kind);

// Starts (start_cubin) compiling for sm_<arch> the kernels a call of the
// body in its natural layout runs, of variant `natural`. Throws kiln::Error
// for a body that cannot be planned.
void prepare_body(const std::string& body, const std::string& kind, Variant natural, int arch);

// The prepare hook of run_op's kernels: the one-node body's shape-generic
// kernels, for the device's architecture.
void prepare_op(const PrepareArgs& a, const std::string& kind);

}  // namespace kiln::cuda::fused
