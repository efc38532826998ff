// Checkpoints saved on a thread of their own while training goes on
// (checkpoint.async_mode = "async", TorchTitan's name). Each save first
// copies the step's tensors to host memory (CheckpointData::on_host), so it
// writes them as they were however the next steps change them; the copy's
// buffers are kept for the next save's copy (memory the size of this
// rank's checkpoint, held for the run, which then allocates nothing new).
// The caller's save runs its collectives over a group of its own. One save
// at a time: starting the next, and the end of the run, wait for the one
// before; a failed save is reported then, as the error of that call.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <optional>
#include <string>

#include "kiln/train/checkpoint.h"

namespace kiln::train {

class AsyncCheckpointer {
 public:
  struct Saved {
    int64_t step = 0;
    std::string path;  // "" on the ranks that do not publish
    double seconds = 0;  // from start to published
  };

  AsyncCheckpointer() = default;
  AsyncCheckpointer(const AsyncCheckpointer&) = delete;
  AsyncCheckpointer& operator=(const AsyncCheckpointer&) = delete;
  // Waits for the save in flight; its error is printed (a destructor cannot throw).
  ~AsyncCheckpointer();

  // Waits for the save in flight (rethrowing its error, and then starting
  // nothing), copies `data` to host memory, and runs `save` of the copy
  // (which returns the path) on a thread. Returns the save waited for.
  std::optional<Saved> start(const CheckpointData& data,
                             std::function<std::string(const CheckpointData&)> save);
  // Waits for the save in flight, rethrowing its error; nothing when none.
  std::optional<Saved> wait();
  bool pending() const { return pending_.valid(); }
  // Whether the save in flight has ended (wait() then returns at once).
  bool finished() const;
  // The host memory the copies take (kept between saves).
  int64_t copy_bytes() const;

 private:
  CheckpointData copy_;  // the save in flight's, or the last one's (its buffers reused)
  std::future<Saved> pending_;
};

}  // namespace kiln::train
