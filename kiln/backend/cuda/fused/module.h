// Cubins loaded for launching, through the CUDA runtime only
// (cudaLibraryLoadData, cudaLibraryGetKernel; never the driver API, so
// binaries start on machines without a driver). Loaded once per device and
// cubin and kept for the process: generated kernels are few and small.
#pragma once
#include <cuda_runtime.h>

#include <string>

namespace kiln::cuda::fused {

// The kernel `symbol` of the cubin named `id` (its cache entry) on `device`;
// `cubin` holds its bytes (loaded the first time). Throws kiln::Error.
cudaKernel_t loaded_kernel(int device, const std::string& id, const std::string& cubin,
                           const char* symbol);

}  // namespace kiln::cuda::fused
