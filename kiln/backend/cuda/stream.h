// The stream a CUDA kernel launches on. Each CUDA device has one in-order
// queue (kiln/runtime/queue.h) whose thread issues that device's work onto
// one CUDA stream and never waits for it; kernels run on that thread and
// launch on current_stream(). Kernels never synchronise the stream.
#pragma once
#include <cuda_runtime.h>

namespace kiln::cuda {

// The calling thread's device and stream; set by the device's queue thread
// (bind_thread). Calling them on another thread is a kiln::Error.
cudaStream_t current_stream();
int current_device();
// The device's copy stream, beside its stream: transfers (copy_stream.h).
cudaStream_t copy_stream();

// Makes `device` current on the calling thread, `stream` its stream and
// `copies` its copy stream.
void bind_thread(int device, cudaStream_t stream, cudaStream_t copies);
// Whether the calling thread is bound to `device` (is its queue thread).
bool bound_to(int device);

// Threads per block of the simple kernels (elementwise, copies), and the
// grid that covers n elements with a grid-stride loop.
inline constexpr int kBlock = 256;
inline unsigned grid_for(long long n) {
  long long blocks = (n + kBlock - 1) / kBlock;
  if (blocks > 65535LL * 8) blocks = 65535LL * 8;
  return blocks < 1 ? 1u : unsigned(blocks);
}

}  // namespace kiln::cuda
