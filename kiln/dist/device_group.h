// The process group whose collectives move a device's memory, over the
// same ranks as a host group: the host group itself for CPU devices; for
// CUDA, NCCL's (kiln/backend/nccl), registered by that backend where kiln
// is built with it. The trainer builds its mesh on it.
#pragma once
#include <functional>
#include <memory>
#include <string>

#include "kiln/runtime/device.h"
#include "kiln/dist/process_group.h"

namespace kiln::dist {

// Made collectively over `host`'s members, each passing its own device.
using DeviceGroupFactory =
    std::function<std::shared_ptr<ProcessGroup>(std::shared_ptr<ProcessGroup> host, int index)>;

// Called once per device kind, at static initialisation, by its backend.
// `describe` names the library that moves the kind's memory ("NCCL 2.28.9"),
// or says why it cannot be used, for `kiln info`.
void register_device_group(DeviceKind kind, DeviceGroupFactory factory,
                           std::function<std::string()> describe);

// The registered `describe` of the kind's group, called; "" when the kind
// has none in this build (the CPU's is the host group).
std::string describe_device_group(DeviceKind kind);

// A kiln::Error when the kind has no process-group backend in this build.
std::shared_ptr<ProcessGroup> device_group(std::shared_ptr<ProcessGroup> host, Device device);

}  // namespace kiln::dist
