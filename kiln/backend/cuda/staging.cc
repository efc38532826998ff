#include "kiln/backend/cuda/staging.h"

#include <algorithm>
#include <cstring>

#include "kiln/backend/cuda/check.h"
#include "kiln/backend/cuda/cuda_graph.h"
#include "kiln/backend/cuda/devices.h"
#include "kiln/backend/cuda/stream.h"
#include "kiln/base/error.h"

namespace kiln::cuda {

void Staging::upload(void* device, const void* host, size_t bytes) {
  DeviceGuard on(device_);
  // On the stream from this thread: never into a graph being captured.
  CaptureExclusion outside(device_, "a copy from the host");
  for (size_t done = 0; done < bytes; done += kChunkBytes) {
    const size_t n = std::min(kChunkBytes, bytes - done);
    Chunk& c = acquire();
    struct Release {
      Staging* s;
      Chunk& c;
      ~Release() { s->release(c); }
    } release{this, c};
    std::memcpy(c.host, static_cast<const char*>(host) + done, n);
    KILN_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(device) + done, c.host, n,
                                    cudaMemcpyHostToDevice, stream_));
    KILN_CUDA_CHECK(cudaEventRecord(c.copied, stream_));
  }
}

void Staging::download(void* host, const void* device, size_t bytes) {
  if (bound_to(device_)) {
    download_on_stream(host, device, bytes);
    return;
  }
  queue_.enqueue([=, this] { download_on_stream(host, device, bytes); },
                 cat("copy from cuda:", device_, " to the host"));
  queue_.synchronize();
}

void Staging::download_on_stream(void* host, const void* device, size_t bytes) {
  if (!download_buffer_)
    KILN_CUDA_CHECK(cudaHostAlloc(&download_buffer_, kChunkBytes, cudaHostAllocPortable));
  for (size_t done = 0; done < bytes; done += kChunkBytes) {
    const size_t n = std::min(kChunkBytes, bytes - done);
    // cudaMemcpyDefault: the source may be pinned host memory (the offload pool).
    KILN_CUDA_CHECK(cudaMemcpyAsync(download_buffer_, static_cast<const char*>(device) + done, n,
                                    cudaMemcpyDefault, stream_));
    KILN_CUDA_CHECK(cudaStreamSynchronize(stream_));
    std::memcpy(static_cast<char*>(host) + done, download_buffer_, n);
  }
}

Staging::Chunk& Staging::acquire() {
  std::unique_lock lock(mu_);
  if (chunks_.capacity() < kMaxChunks) chunks_.reserve(kMaxChunks);
  while (true) {
    for (Chunk& c : chunks_) {
      if (c.busy) continue;
      cudaError_t err = cudaEventQuery(c.copied);
      if (err == cudaErrorNotReady) {
        cudaGetLastError();  // "not ready" is an answer, not an error
        continue;
      }
      KILN_CUDA_CHECK(err);
      c.busy = true;
      return c;
    }
    if (chunks_.size() < kMaxChunks) {
      Chunk c;
      KILN_CUDA_CHECK(cudaHostAlloc(&c.host, kChunkBytes, cudaHostAllocPortable));
      KILN_CUDA_CHECK(cudaEventCreateWithFlags(&c.copied, cudaEventDisableTiming));
      c.busy = true;
      chunks_.push_back(c);
      return chunks_.back();
    }
    // Every chunk is in flight: wait for the next in turn, the oldest.
    Chunk& c = chunks_[next_];
    next_ = (next_ + 1) % chunks_.size();
    if (c.busy) {  // another thread is filling it
      released_cv_.wait(lock);
      continue;
    }
    c.busy = true;
    lock.unlock();
    cudaError_t err = cudaEventSynchronize(c.copied);
    if (err != cudaSuccess) {
      release(c);
      KILN_CUDA_CHECK(err);
    }
    return c;
  }
}

void Staging::release(Chunk& c) {
  {
    std::lock_guard lock(mu_);
    c.busy = false;
  }
  released_cv_.notify_all();
}

}  // namespace kiln::cuda
