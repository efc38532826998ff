// The handle of an asynchronous communication: a process group returns one
// at once and runs the transfer on its communication thread, so the caller
// computes while the data moves, and waits only where it needs the result.
#pragma once
#include <condition_variable>
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

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  bool done_ = false;
  std::optional<std::string> error_;
};

class Work {
 public:
  Work();  // an operation that is already complete
  explicit Work(std::shared_ptr<WorkState> state) : state_(std::move(state)) {}

  // Blocks until the operation completes; throws kiln::Error if it failed.
  // It never blocks for ever: the backend fails an operation that does not
  // complete within its group's timeout (ProcessGroup::set_timeout).
  void wait() const { state_->wait(); }
  bool done() const { return state_->done(); }

 private:
  std::shared_ptr<WorkState> state_;
};

}  // namespace kiln::dist
