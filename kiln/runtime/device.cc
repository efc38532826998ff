#include "kiln/runtime/device.h"

#include <cstdlib>

#include "kiln/base/error.h"

namespace kiln {

std::string to_string(Device d) {
  std::string s = d.kind == DeviceKind::cpu ? "cpu" : "cuda";
  if (d.kind != DeviceKind::cpu || d.index != 0) s += ":" + std::to_string(d.index);
  return s;
}

Device parse_device(std::string_view s) {
  Device d;
  std::string_view kind = s.substr(0, s.find(':'));
  if (kind == "cpu") d.kind = DeviceKind::cpu;
  else if (kind == "cuda") d.kind = DeviceKind::cuda;
  else fail("unknown device '", s, "': use cpu, cuda or cuda:N");
  if (kind.size() < s.size()) {
    std::string idx(s.substr(kind.size() + 1));
    char* end = nullptr;
    long v = std::strtol(idx.c_str(), &end, 10);
    KILN_CHECK(!idx.empty() && *end == '\0' && v >= 0, "bad device index in '", s,
               "': use cpu, cuda or cuda:N");
    d.index = static_cast<int>(v);
  }
  return d;
}

}  // namespace kiln
