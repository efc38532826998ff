#include "kiln/backend/cuda/stream.h"

#include "kiln/backend/cuda/check.h"
#include "kiln/base/error.h"

namespace kiln::cuda {
namespace {

thread_local bool t_bound = false;
thread_local int t_device = 0;
thread_local cudaStream_t t_stream = nullptr;
thread_local cudaStream_t t_copy_stream = nullptr;

void check_bound() {
  KILN_CHECK(t_bound, "a CUDA kernel ran outside a CUDA device's queue thread; CUDA work must "
             "go through the device's queue (kiln/runtime/queue.h)");
}

}  // namespace

cudaStream_t current_stream() {
  check_bound();
  return t_stream;
}

int current_device() {
  check_bound();
  return t_device;
}

cudaStream_t copy_stream() {
  check_bound();
  return t_copy_stream;
}

void bind_thread(int device, cudaStream_t stream, cudaStream_t copies) {
  KILN_CUDA_CHECK(cudaSetDevice(device));
  t_bound = true;
  t_device = device;
  t_stream = stream;
  t_copy_stream = copies;
}

bool bound_to(int device) { return t_bound && t_device == device; }

}  // namespace kiln::cuda
