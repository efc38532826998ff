#include "kiln/train/run_device.h"

#include "kiln/base/error.h"
#include "kiln/runtime/backend.h"

namespace kiln::train {

Device run_device(const std::string& setting, int local_rank, int local_ranks) {
  Device d;
  try {
    d = parse_device(setting);
  } catch (const Error& e) {
    fail("training.device: ", e.what());
  }
  const bool indexed = setting.find(':') != std::string::npos;
  try {
    if (!indexed) {
      const int count = backend(Device{d.kind, 0}).device_count();
      if (d.kind == DeviceKind::cpu) {
        d.index = local_rank % count;
      } else {
        KILN_CHECK(local_rank < count, "this host runs ", local_ranks, " ranks but has ", count, " ",
                   setting, " device", count == 1 ? "" : "s", ": local rank ", local_rank,
                   " has none of its own; start at most ", count,
                   " ranks per host, or name a device with --training.device ", setting, ":N");
        d.index = local_rank;
      }
    }
    backend(d);  // it exists
  } catch (const Error& e) {
    fail("training.device = ", setting, ": ", e.what());
  }
  return d;
}

}  // namespace kiln::train
