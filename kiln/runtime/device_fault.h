// An error the device reports for work issued before the call that met it
// (CUDA's sticky faults: an illegal address in an earlier kernel). A queue
// task that throws one fails as a fault found at a synchronisation does:
// the error names the tasks run since the last one, which may have caused
// it (kiln/runtime/queue.h).
#pragma once
#include "kiln/base/error.h"

namespace kiln {

class DeviceFault : public Error {
 public:
  using Error::Error;
};

}  // namespace kiln
