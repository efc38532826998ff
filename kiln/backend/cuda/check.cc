#include "kiln/backend/cuda/check.h"

#include "kiln/base/error.h"
#include "kiln/runtime/device_fault.h"

namespace kiln::cuda {

namespace {

// Errors a kernel raised that every later call of the process returns:
// they belong to earlier work, not to the call that met them.
bool sticky(cudaError_t err) {
  switch (err) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorHardwareStackError:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable: return true;
    default: return false;
  }
}

}  // namespace

void fail_call(cudaError_t err, const char* call, const char* file, int line) {
  std::string what = cat("CUDA error ", cudaGetErrorName(err), " (", cudaGetErrorString(err),
                         ") from ", call, " at ", file, ":", line);
  if (sticky(err))
    throw DeviceFault(cat(what, "; a kernel issued earlier faulted, and the GPU cannot be used "
                               "again in this process"));
  throw Error(what);
}

}  // namespace kiln::cuda
