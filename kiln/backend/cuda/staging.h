// Host<->device copies through pinned (page-locked) host buffers, which the
// GPU's copy engines read and write directly, in the device queue's order.
//
// Uploads from a host thread return as soon as the data is in a pinned
// chunk: the chunk's copy is a queued task, and the chunk is reused once an
// event recorded after that copy has completed. Downloads, and uploads made
// on the queue thread itself (a kernel's), wait for their copy.
#pragma once
#include <cuda_runtime.h>

#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <vector>

#include "kiln/runtime/backend.h"  // DeviceQueue

namespace kiln::cuda {

class Staging {
 public:
  Staging(int device, DeviceQueue& queue) : device_(device), queue_(queue) {}
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;

  // Bytes a chunk holds, and the chunks an upload may keep in flight.
  static constexpr size_t kChunkBytes = size_t(8) << 20;
  static constexpr size_t kMaxChunks = 16;

  // From any thread (the copy_from_host / copy_to_host of the Backend).
  void upload(void* device, const void* host, size_t bytes);
  void download(void* host, const void* device, size_t bytes);

 private:
  struct Chunk {
    void* host = nullptr;
    cudaEvent_t copied = nullptr;
    bool busy = false;      // held by an upload whose task has not run or been dropped
    bool recorded = false;  // `copied` was recorded after its copy
  };
  Chunk& acquire();  // a free chunk, waiting for the oldest one if need be
  void finished(Chunk& c, bool recorded);
  void copy_on_stream(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);

  int device_;
  DeviceQueue& queue_;
  std::mutex mu_;
  std::condition_variable done_cv_;
  std::vector<Chunk> chunks_;  // reserved up front: chunks never move
  size_t next_ = 0;            // the chunk handed out next, round robin
  void* own_ = nullptr;        // the queue thread's chunk for waited copies
};

}  // namespace kiln::cuda
