#include "kiln/backend/cuda/cublaslt.h"

#include "kiln/backend/cuda/stream.h"
#include "kiln/base/error.h"

namespace kiln::cuda {

void fail_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  fail("cuBLASLt error ", cublasLtGetStatusName(status), " (", cublasLtGetStatusString(status),
       ") from ", call, " at ", file, ":", line);
}

cublasLtHandle_t cublaslt_handle() {
  current_stream();  // a queue thread's, bound to its device
  thread_local cublasLtHandle_t handle = [] {
    cublasLtHandle_t h = nullptr;
    KILN_CUBLAS_CHECK(cublasLtCreate(&h));
    return h;
  }();
  return handle;
}

std::string gemm_library() {
  const size_t v = cublasLtGetVersion();  // major * 10000 + minor * 100 + patch
  return cat("cuBLASLt ", v / 10000, ".", v / 100 % 100, ".", v % 100);
}

}  // namespace kiln::cuda
