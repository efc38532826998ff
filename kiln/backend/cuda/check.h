// Error checks of CUDA runtime calls: a failure is a kiln::Error naming the
// call, where it was made and CUDA's description of the error.
#pragma once
#include <cuda_runtime.h>

namespace kiln::cuda {

[[noreturn]] void fail_call(cudaError_t err, const char* call, const char* file, int line);

}  // namespace kiln::cuda

#define KILN_CUDA_CHECK(call)                                                  \
  do {                                                                         \
    cudaError_t kiln_cuda_err_ = (call);                                       \
    if (kiln_cuda_err_ != cudaSuccess)                                         \
      ::kiln::cuda::fail_call(kiln_cuda_err_, #call, __FILE__, __LINE__);      \
  } while (0)

// After a kernel launch: a launch that failed (bad configuration, no kernel
// image for this GPU) is reported at once.
#define KILN_CUDA_CHECK_LAUNCH() KILN_CUDA_CHECK(cudaGetLastError())
