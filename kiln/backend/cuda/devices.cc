#include "kiln/backend/cuda/devices.h"

#include <cuda_runtime.h>

#include <cstdio>

#include "kiln/backend/cuda/check.h"
#include "kiln/base/error.h"

namespace kiln::cuda {
namespace {

struct Census {
  int count = 0;
  std::string reason;
};

// Asked once: the answer cannot change while the process runs.
const Census& census() {
  static const Census c = [] {
    Census r;
    cudaError_t err = cudaGetDeviceCount(&r.count);
    if (err != cudaSuccess) {
      cudaGetLastError();  // not sticky: clear it so later calls do not see it
      r.count = 0;
      r.reason = err == cudaErrorInsufficientDriver
                     ? "no CUDA driver is installed, or it is older than this kiln's CUDA runtime"
                 : err == cudaErrorNoDevice
                     ? "the CUDA driver finds no GPU (or CUDA_VISIBLE_DEVICES hides them)"
                     : cat("cudaGetDeviceCount failed: ", cudaGetErrorName(err), " (",
                           cudaGetErrorString(err), ")");
    } else if (r.count == 0) {
      r.reason = "the CUDA driver finds no GPU";
    }
    return r;
  }();
  return c;
}

std::string version(int v) { return cat(v / 1000, ".", v % 1000 / 10); }

cudaDeviceProp properties(int index) {
  cudaDeviceProp p{};
  KILN_CUDA_CHECK(cudaGetDeviceProperties(&p, index));
  return p;
}

}  // namespace

int device_count() { return census().count; }
std::string no_device_reason() { return census().reason; }

std::string device_name(int index) { return properties(index).name; }

int compute_capability(int index) {
  cudaDeviceProp p = properties(index);
  return p.major * 10 + p.minor;
}

std::string describe_device(int index) {
  cudaDeviceProp p = properties(index);
  int driver = 0, runtime = 0;
  KILN_CUDA_CHECK(cudaDriverGetVersion(&driver));
  KILN_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  char gib[32];
  std::snprintf(gib, sizeof gib, "%.1f GiB", double(p.totalGlobalMem) / double(1ull << 30));
  return cat("cuda:", index, ": ", p.name, ", ", gib, ", compute capability ", p.major, ".",
             p.minor, ", ", p.multiProcessorCount, " SMs, driver ", version(driver), ", runtime ",
             version(runtime));
}

DeviceGuard::DeviceGuard(int device) {
  KILN_CUDA_CHECK(cudaGetDevice(&previous_));
  if (previous_ != device) KILN_CUDA_CHECK(cudaSetDevice(device));
}

DeviceGuard::~DeviceGuard() {
  int now = -1;
  if (cudaGetDevice(&now) == cudaSuccess && now != previous_) cudaSetDevice(previous_);
}

}  // namespace kiln::cuda
