#include "kiln/dist/device_group.h"

#include <map>
#include <mutex>

#include "kiln/base/error.h"

namespace kiln::dist {
namespace {

struct Registered {
  DeviceGroupFactory factory;
  std::function<std::string()> describe;
};

std::mutex mu;
std::map<DeviceKind, Registered>& registered() {
  static std::map<DeviceKind, Registered> r;
  return r;
}

}  // namespace

void register_device_group(DeviceKind kind, DeviceGroupFactory factory,
                           std::function<std::string()> describe) {
  std::lock_guard lock(mu);
  registered()[kind] = {std::move(factory), std::move(describe)};
}

std::string describe_device_group(DeviceKind kind) {
  std::function<std::string()> describe;
  {
    std::lock_guard lock(mu);
    auto it = registered().find(kind);
    if (it != registered().end()) describe = it->second.describe;
  }
  return describe ? describe() : "";
}

std::shared_ptr<ProcessGroup> device_group(std::shared_ptr<ProcessGroup> host, Device device) {
  if (device.kind == DeviceKind::cpu) return host;
  DeviceGroupFactory factory;
  {
    std::lock_guard lock(mu);
    auto it = registered().find(device.kind);
    if (it != registered().end()) factory = it->second.factory;
  }
  KILN_CHECK(factory, "collectives on ", to_string(device), " need a process-group backend for ",
             "its memory, and this kiln has none (a CUDA build registers NCCL's)");
  return factory(std::move(host), device.index);
}

}  // namespace kiln::dist
