// Host<->device copies through pinned (page-locked) host buffers, which the
// GPU's copy engines read and write directly.
//
// An upload goes onto the device's stream straight from the calling thread
// and returns once the data is in a pinned chunk; a chunk is reused once an
// event recorded after its copy has completed. This keeps the queue's
// order: the destination is a block no queued task holds (the allocator
// only hands out blocks whose users have all been launched), and the work
// that reads it is enqueued after the upload was issued. A download runs as
// a queued task, after the work before it, and waits for its copy.
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
  Staging(int device, cudaStream_t stream, DeviceQueue& queue)
      : device_(device), stream_(stream), queue_(queue) {}
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;

  // Bytes a chunk holds, and the most chunks uploads keep in flight.
  static constexpr size_t kChunkBytes = size_t(8) << 20;
  static constexpr size_t kMaxChunks = 16;

  // From any thread (the Backend's copy_from_host / copy_to_host).
  void upload(void* device, const void* host, size_t bytes);
  void download(void* host, const void* device, size_t bytes);

 private:
  struct Chunk {
    void* host = nullptr;
    cudaEvent_t copied = nullptr;  // recorded after the chunk's latest copy
    bool busy = false;             // being filled and issued by an upload
  };
  Chunk& acquire();  // a chunk whose last copy is done, waiting for the oldest if need be
  void release(Chunk& c);
  void download_on_stream(void* host, const void* device, size_t bytes);  // the queue thread's

  int device_;
  cudaStream_t stream_;
  DeviceQueue& queue_;
  std::mutex mu_;
  std::condition_variable released_cv_;
  std::vector<Chunk> chunks_;  // reserved up front: chunks never move
  size_t next_ = 0;            // the chunk waited for next when all are in flight
  void* download_buffer_ = nullptr;  // the queue thread's
};

}  // namespace kiln::cuda
