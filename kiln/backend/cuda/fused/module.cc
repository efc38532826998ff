#include "kiln/backend/cuda/fused/module.h"

#include <map>
#include <mutex>
#include <utility>

#include "kiln/backend/cuda/check.h"

namespace kiln::cuda::fused {

cudaKernel_t loaded_kernel(int device, const std::string& id, const std::string& cubin,
                           const char* symbol) {
  static std::mutex mu;
  // Never freed: kernels may be launched until the process exits.
  static auto* libraries = new std::map<std::pair<int, std::string>, cudaLibrary_t>;
  static auto* kernels = new std::map<std::pair<cudaLibrary_t, std::string>, cudaKernel_t>;
  std::lock_guard lock(mu);
  cudaLibrary_t& lib = (*libraries)[{device, id}];
  if (!lib) KILN_CUDA_CHECK(cudaLibraryLoadData(&lib, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
  cudaKernel_t& k = (*kernels)[{lib, symbol}];
  if (!k) KILN_CUDA_CHECK(cudaLibraryGetKernel(&k, lib, symbol));
  return k;
}

}  // namespace kiln::cuda::fused
