#include "kiln/backend/cuda/check.h"

#include "kiln/base/error.h"

namespace kiln::cuda {

void fail_call(cudaError_t err, const char* call, const char* file, int line) {
  fail("CUDA error ", cudaGetErrorName(err), " (", cudaGetErrorString(err), ") from ", call, " at ",
       file, ":", line);
}

}  // namespace kiln::cuda
