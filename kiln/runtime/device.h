// Devices. CPU is the default and always present; other kinds exist where a
// backend for them was built and registered.
#pragma once
#include <string>
#include <string_view>

namespace kiln {

enum class DeviceKind { cpu, cuda };

struct Device {
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;
  friend bool operator==(const Device&, const Device&) = default;
};

inline constexpr Device kCPU{};

std::string to_string(Device d);          // "cpu", "cuda:1"
Device parse_device(std::string_view s);  // throws naming the accepted forms

}  // namespace kiln
