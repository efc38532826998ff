#include "kiln/backend/cuda/staging.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "kiln/backend/cuda/check.h"
#include "kiln/backend/cuda/devices.h"
#include "kiln/backend/cuda/stream.h"
#include "kiln/base/error.h"

namespace kiln::cuda {

void Staging::upload(void* device, const void* host, size_t bytes) {
  if (bound_to(device_)) {
    copy_on_stream(device, host, bytes, cudaMemcpyHostToDevice);
    return;
  }
  // Hands its chunk back when the task is done with it: after the event is
  // recorded, or at once when the task was dropped behind an earlier error.
  struct Lease {
    Staging* staging;
    Chunk* chunk;
    bool recorded = false;
    ~Lease() { staging->finished(*chunk, recorded); }
  };
  for (size_t done = 0; done < bytes; done += kChunkBytes) {
    const size_t n = std::min(kChunkBytes, bytes - done);
    std::shared_ptr<Lease> lease(new Lease{this, &acquire()});
    std::memcpy(lease->chunk->host, static_cast<const char*>(host) + done, n);
    void* dst = static_cast<char*>(device) + done;
    queue_.enqueue(
        [lease, dst, n] {
          cudaStream_t s = current_stream();
          KILN_CUDA_CHECK(cudaMemcpyAsync(dst, lease->chunk->host, n, cudaMemcpyHostToDevice, s));
          KILN_CUDA_CHECK(cudaEventRecord(lease->chunk->copied, s));
          lease->recorded = true;
        },
        cat("copy to cuda:", device_));
  }
}

void Staging::download(void* host, const void* device, size_t bytes) {
  if (bound_to(device_)) {
    copy_on_stream(host, device, bytes, cudaMemcpyDeviceToHost);
    return;
  }
  queue_.enqueue([=, this] { copy_on_stream(host, device, bytes, cudaMemcpyDeviceToHost); },
                 cat("copy from cuda:", device_, " to the host"));
  queue_.synchronize();
}

// On the queue thread: through its own chunk, waiting for each piece.
void Staging::copy_on_stream(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (!own_) KILN_CUDA_CHECK(cudaHostAlloc(&own_, kChunkBytes, cudaHostAllocPortable));
  cudaStream_t s = current_stream();
  const bool up = kind == cudaMemcpyHostToDevice;
  for (size_t done = 0; done < bytes; done += kChunkBytes) {
    const size_t n = std::min(kChunkBytes, bytes - done);
    char* d = static_cast<char*>(dst) + done;
    const char* from = static_cast<const char*>(src) + done;
    if (up) std::memcpy(own_, from, n);
    KILN_CUDA_CHECK(cudaMemcpyAsync(up ? d : own_, up ? own_ : from, n, kind, s));
    KILN_CUDA_CHECK(cudaStreamSynchronize(s));
    if (!up) std::memcpy(d, own_, n);
  }
}

Staging::Chunk& Staging::acquire() {
  std::unique_lock lock(mu_);
  DeviceGuard on(device_);
  if (chunks_.capacity() < kMaxChunks) chunks_.reserve(kMaxChunks);
  while (true) {
    for (Chunk& c : chunks_) {
      if (c.busy) continue;
      if (c.recorded) {
        cudaError_t err = cudaEventQuery(c.copied);
        if (err == cudaErrorNotReady) {
          cudaGetLastError();  // "not ready" is an answer, not an error
          continue;
        }
        KILN_CUDA_CHECK(err);
      }
      c.busy = true;
      c.recorded = false;
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
    done_cv_.wait(lock, [&] { return !c.busy; });
    if (c.recorded) {
      c.busy = true;  // ours while the lock is released
      lock.unlock();
      cudaError_t err = cudaEventSynchronize(c.copied);
      lock.lock();
      c.recorded = false;
      if (err != cudaSuccess) {
        c.busy = false;
        KILN_CUDA_CHECK(err);
      }
      return c;
    }
  }
}

void Staging::finished(Chunk& c, bool recorded) {
  {
    std::lock_guard lock(mu_);
    c.busy = false;
    c.recorded = recorded;
  }
  done_cv_.notify_all();
}

}  // namespace kiln::cuda
