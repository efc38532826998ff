// The handle of an asynchronous communication: a process group returns one
// at once and runs the transfer on its communication thread, so the caller
// computes while the data moves, and waits only where it needs the result.
#pragma once
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace kiln::dist {

// The completion side, held by the backend that runs the operation.
class WorkState {
 public:
  void finish();
  void fail(std::string message);  // the message of the kiln::Error wait() throws
  bool done() const;
  void wait() const;

  // For work a device stream completes (NCCL's): `enqueue_wait` makes the
  // calling device queue's later work wait for it on the device, or
  // returns false where it cannot (another thread); `report` takes a
  // failure that comes after such a wait, for the device's next
  // synchronisation to raise. Set before the Work is handed out.
  void set_device_wait(std::function<bool()> enqueue_wait,
                       std::function<void(const std::string&)> report);
  // Work::wait_on_device.
  bool wait_on_device();
  // For work a CUDA graph being captured holds: nothing runs until the
  // graph is replayed, so the host has nothing to wait for (wait() returns),
  // but wait_on_device still orders the device's later work after it (in
  // the graph). Call after set_device_wait.
  void finish_captured();

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool done_ = false;
  std::optional<std::string> error_;
  std::function<bool()> enqueue_wait_;
  std::function<void(const std::string&)> report_;
  bool device_waited_ = false;
  bool captured_ = false;
};

class Work {
 public:
  Work();  // an operation that is already complete
  explicit Work(std::shared_ptr<WorkState> state) : state_(std::move(state)) {}

  // Blocks until the operation completes; throws kiln::Error if it failed.
  // It never blocks for ever: the backend fails an operation that does not
  // complete within its group's timeout (ProcessGroup::set_timeout).
  void wait() const { state_->wait(); }
  // Where the group can, makes the calling device queue's later work wait
  // for this operation on the device instead of blocking the host, and
  // returns true: a failure after it is raised at the device's next
  // synchronisation. False: call wait().
  bool wait_on_device() const { return state_->wait_on_device(); }
  bool done() const { return state_->done(); }

 private:
  std::shared_ptr<WorkState> state_;
};

}  // namespace kiln::dist
