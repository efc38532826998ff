// Failures of work the device's stream was made to wait for while the host
// went on (a collective whose wait is ordered on the device: dist::Work::
// wait_on_device). The failure arrives after the waiting kernel returned,
// so it is kept here and raised when the device is next synchronised, as
// a fault in a kernel is.
#pragma once
#include <string>

namespace kiln::cuda {

// Keeps `message` for `device` (the first one, until it is taken).
void report_async_error(int device, const std::string& message);

// The kept message, cleared; "" when there is none.
std::string take_async_error(int device);

}  // namespace kiln::cuda
