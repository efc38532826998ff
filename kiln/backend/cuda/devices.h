// The CUDA devices of this machine, asked of the runtime library (cudart,
// which loads the driver itself): with no driver or no GPU there are none,
// and nothing fails.
#pragma once
#include <string>

namespace kiln::cuda {

int device_count();              // 0 without a usable driver and GPU; never throws
std::string no_device_reason();  // why device_count() is 0 ("" when it is not)
// "cuda:0: NVIDIA H200, 139.8 GiB, compute capability 9.0, 132 SMs, driver 13.0, runtime 13.0"
std::string describe_device(int index);
std::string device_name(int index);
int compute_capability(int index);  // major * 10 + minor: 90 for sm_90

// Makes `device` current on the calling thread for a scope (allocations and
// events of that device from a host thread), then restores the previous one
// where its primary context is active; elsewhere (device 0 of a thread that
// never chose one) restoring would create that context, so `device` stays.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

}  // namespace kiln::cuda
