// Temporary device memory for a kernel's own use (a GEMM's workspace, a
// sort's buffers): one buffer per device queue thread, grown on demand and
// stream-ordered (the buffer it replaces is freed on the stream, after the
// work that used it). A kernel may use the pointer until it returns; the
// next kernel on the stream may reuse the memory. While a program is
// recorded (private_memory.h), the buffer is the recording's own.
#pragma once
#include <cstddef>

namespace kiln::cuda {

void* scratch(size_t bytes);

}  // namespace kiln::cuda
