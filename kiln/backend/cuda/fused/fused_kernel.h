// The CUDA kernel of op "fused" (the compiler-made fused groups of
// kiln/compiler/fuse.h), registered with strided inputs; the elementwise and
// reduction ops' CUDA kernels (../elementwise.cc, ../reduction.cc) run
// their op as a one-node body through the same path, so every elementwise
// and reduction kernel on CUDA is generated code (codegen.h).
//
// A body is planned once (codegen/plan.h); each layout its calls bring gets
// a kernel generated for it, compiled by NVRTC for the device's architecture
// and stored in the tiered compile cache (cubin_cache.h), then loaded once
// per device (module.h). There is no interpreter on the device, so the first
// call of a body with a layout waits for its kernel: on the device's queue
// thread, where kernels run, while the host thread that records ops goes on
// and the GPU runs the work already on the stream. Later calls, and later
// processes (the cache's L2 and L3), do not compile.
#pragma once
#include <span>
#include <string>

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

}  // namespace kiln::cuda::fused
