// cuBLASLt for the GEMM kernels: error checks and the calling queue
// thread's handle (one per thread, so per device: a handle belongs to the
// device current when it was made).
#pragma once
#include <cublasLt.h>

#include <string>

namespace kiln::cuda {

[[noreturn]] void fail_cublas(cublasStatus_t status, const char* call, const char* file, int line);

cublasLtHandle_t cublaslt_handle();
std::string gemm_library();  // "cuBLASLt 13.0.0"

}  // namespace kiln::cuda

#define KILN_CUBLAS_CHECK(call)                                                \
  do {                                                                         \
    cublasStatus_t kiln_cublas_status_ = (call);                               \
    if (kiln_cublas_status_ != CUBLAS_STATUS_SUCCESS)                          \
      ::kiln::cuda::fail_cublas(kiln_cublas_status_, #call, __FILE__, __LINE__); \
  } while (0)
