// Transfers on CUDA (Backend::start_transfer): each copy runs on the
// device's copy stream, so the copy engine moves activations between device
// memory and the pinned offload pool while the compute stream runs kernels.
// A start forks the copy stream from the compute stream (an event recorded
// there), so the copy reads what the work before it wrote and writes a
// buffer that work is done with; its finish joins it back (an event the
// compute stream waits for). Under a CUDA graph capture the fork pulls the
// copy stream into the capture and the finish joins it, so both streams'
// work lands in the graph with the same order.
#pragma once
#include "kiln/runtime/kernel.h"

namespace kiln::cuda {

// On the device's queue thread.
void start_transfer(const TensorRef& dst, const TensorRef& src);
void finish_transfer(const void* dst);

}  // namespace kiln::cuda
