// The CUDA backend: each GPU is a kiln device with its own caching allocator
// over cudaMalloc (device_memory.h), an offload pool of pinned host memory
// (pinned_memory.h), one in-order queue whose thread issues
// the device's work onto one CUDA stream and never waits for it (and its
// transfers onto a copy stream beside it, copy_stream.h), and
// host copies through pinned staging buffers (staging.h). A device's state
// is made on its first use, so a process that never touches a GPU starts
// no CUDA context. Registered even where there is no GPU: it then has no
// devices, and using one is an error that says why.
#include <cuda_runtime.h>

#include <memory>
#include <mutex>
#include <vector>

#include "kiln/backend/cuda/async_error.h"
#include "kiln/backend/cuda/check.h"
#include "kiln/backend/cuda/copy_stream.h"
#include "kiln/backend/cuda/cublaslt.h"
#include "kiln/backend/cuda/cuda_graph.h"
#include "kiln/backend/cuda/device_memory.h"
#include "kiln/backend/cuda/devices.h"
#include "kiln/backend/cuda/kernels/index_fault.h"
#include "kiln/backend/cuda/non_finite.h"
#include "kiln/backend/cuda/pinned_memory.h"
#include "kiln/backend/cuda/staging.h"
#include "kiln/backend/cuda/stream.h"
#include "kiln/backend/cuda/strided_copy.h"
#include "kiln/base/error.h"
#include "kiln/runtime/backend.h"

namespace kiln::cuda {
namespace {

struct DeviceState {
  DeviceState(int index, cudaStream_t s)
      : memory(index),
        allocator(memory),
        pinned(index),
        offload_allocator(pinned),
        queue(cat("cuda:", index)),
        staging(index, s, queue) {}
  DeviceMemory memory;
  CachingAllocator allocator;
  PinnedMemory pinned;
  CachingAllocator offload_allocator;
  DeviceQueue queue;
  Staging staging;
};

class CudaBackend final : public Backend {
 public:
  DeviceKind kind() const override { return DeviceKind::cuda; }
  int device_count() const override { return cuda::device_count(); }
  std::string no_device_reason() const override { return cuda::no_device_reason(); }
  std::string describe(int index) const override { return describe_device(index); }
  std::string model(int index) const override { return device_name(index); }
  std::string gemm_isa(int index) const override {
    return cat(gemm_library(), " on sm_", compute_capability(index));
  }
  CachingAllocator& allocator(int index) override { return state(index).allocator; }
  CachingAllocator* offload_allocator(int index) override { return &state(index).offload_allocator; }
  DeviceQueue& queue(int index) override { return state(index).queue; }
  void copy_to_host(void* host, const void* device, size_t bytes, int index) override {
    if (bytes) state(index).staging.download(host, device, bytes);
  }
  void copy_from_host(void* device, const void* host, size_t bytes, int index) override {
    if (bytes) state(index).staging.upload(device, host, bytes);
  }
  void strided_copy(const TensorRef& dst, const TensorRef& src) override {
    cuda::strided_copy(dst, src);
  }
  void start_transfer(const TensorRef& dst, const TensorRef& src) override {
    cuda::start_transfer(dst, src);
  }
  void finish_transfer(const void* dst) override { cuda::finish_transfer(dst); }
  bool transfers_apart() const override { return true; }
  NonFinite find_non_finite(const TensorRef& t) override { return cuda::find_non_finite(t); }
  std::unique_ptr<RecordedWork> record(int, std::function<void()> work) override {
    return capture_graph(std::move(work));
  }
  // A graph holds the stream's work only: no host work runs at a replay.
  bool records_host_work() const override { return false; }

 private:
  DeviceState& state(int index) {
    std::lock_guard lock(mu_);
    if (states_.empty()) states_.resize(size_t(cuda::device_count()));
    KILN_CHECK(index >= 0 && size_t(index) < states_.size(), "device 'cuda:", index,
               "' does not exist (", states_.size(), " CUDA devices found)");
    std::unique_ptr<DeviceState>& s = states_[size_t(index)];
    if (!s) s = start(index);
    return *s;
  }

  // The queue thread binds the device and its stream before any other
  // work; synchronize() then also waits for the stream and reports what
  // the GPU raised (a fault in a kernel, or a bad index an indexing kernel
  // recorded, is only seen there).
  static std::unique_ptr<DeviceState> start(int index) {
    cudaStream_t stream = nullptr, copies = nullptr;
    {
      DeviceGuard on(index);
      KILN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      KILN_CUDA_CHECK(cudaStreamCreateWithFlags(&copies, cudaStreamNonBlocking));
    }
    auto s = std::make_unique<DeviceState>(index, stream);
    s->queue.set_sync_hook([index, stream, copies] {
      KILN_CUDA_CHECK(cudaStreamSynchronize(stream));
      KILN_CUDA_CHECK(cudaStreamSynchronize(copies));
      // An out-of-range index an indexing kernel met (and skipped).
      if (std::string fault = take_index_fault(index); !fault.empty()) fail(fault);
      // A collective the stream waited for without the host, failed since.
      if (std::string error = take_async_error(index); !error.empty()) fail(error);
    });
    s->queue.enqueue([index, stream, copies] { bind_thread(index, stream, copies); },
                     cat("starting cuda:", index));
    s->queue.synchronize();
    return s;
  }

  std::mutex mu_;
  // Never destroyed, as the backend registry is not: queue threads may be
  // running while the process exits.
  std::vector<std::unique_ptr<DeviceState>> states_;
};

const bool registered = [] {
  register_backend(std::make_unique<CudaBackend>());
  return true;
}();

}  // namespace
}  // namespace kiln::cuda
