#include "kiln/dist/device_group.h"

#include <map>
#include <mutex>

#include "kiln/base/error.h"

namespace kiln::dist {
namespace {

std::mutex mu;
std::map<DeviceKind, DeviceGroupFactory>& factories() {
  static std::map<DeviceKind, DeviceGroupFactory> f;
  return f;
}

}  // namespace

void register_device_group(DeviceKind kind, DeviceGroupFactory factory) {
  std::lock_guard lock(mu);
  factories()[kind] = std::move(factory);
}

std::shared_ptr<ProcessGroup> device_group(std::shared_ptr<ProcessGroup> host, Device device) {
  if (device.kind == DeviceKind::cpu) return host;
  DeviceGroupFactory factory;
  {
    std::lock_guard lock(mu);
    auto it = factories().find(device.kind);
    if (it != factories().end()) factory = it->second;
  }
  KILN_CHECK(factory, "collectives on ", to_string(device), " need a process-group backend for ",
             "its memory, and this kiln has none (a CUDA build registers NCCL's)");
  return factory(std::move(host), device.index);
}

}  // namespace kiln::dist
