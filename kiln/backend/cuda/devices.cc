#include "kiln/backend/cuda/devices.h"

#include <cudaTypedefs.h>  // PFN_cuDevicePrimaryCtxGetState_v7000
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

// cuDevicePrimaryCtxGetState, from the driver the runtime loaded (kiln does
// not link libcuda); nullptr where the driver does not offer it. Looked up once.
PFN_cuDevicePrimaryCtxGetState_v7000 primary_context_state() {
  static const auto get_state = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    // 7000: the CUDA version whose signature the _v7000 typedef declares.
    cudaError_t err = cudaGetDriverEntryPointByVersion("cuDevicePrimaryCtxGetState", &fn, 7000,
                                                       cudaEnableDefault, &found);
    if (err != cudaSuccess) cudaGetLastError();  // not sticky: clear it, as census() does
    return reinterpret_cast<PFN_cuDevicePrimaryCtxGetState_v7000>(
        err == cudaSuccess && found == cudaDriverEntryPointSuccess ? fn : nullptr);
  }();
  return get_state;
}

// Whether `device`'s primary context is active, so that making it current
// creates nothing (as PyTorch's MaybeSetDevice asks; a CUdevice is its
// ordinal). True where the driver cannot tell.
bool has_primary_context(int device) {
  PFN_cuDevicePrimaryCtxGetState_v7000 get_state = primary_context_state();
  if (!get_state) return true;
  unsigned int flags = 0;
  int active = 0;
  return get_state(device, &flags, &active) != CUDA_SUCCESS || active == 1;
}

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
  // cudaSetDevice initialises the device's primary context (since CUDA 12):
  // restoring device 0 on a thread that never chose one would hold a context
  // (hundreds of MiB) on GPU 0 in every process of a multi-GPU run.
  int now = -1;
  if (cudaGetDevice(&now) == cudaSuccess && now != previous_ && has_primary_context(previous_))
    cudaSetDevice(previous_);
}

}  // namespace kiln::cuda
