#include "kiln/dist/work.h"

#include "kiln/base/error.h"

namespace kiln::dist {

void WorkState::finish() {
  {
    std::lock_guard lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
}

void WorkState::fail(std::string message) {
  {
    std::lock_guard lock(mu_);
    if (device_waited_) report_(message);
    error_ = std::move(message);
    done_ = true;
  }
  cv_.notify_all();
}

void WorkState::set_device_wait(std::function<bool()> enqueue_wait,
                                std::function<void(const std::string&)> report) {
  std::lock_guard lock(mu_);
  enqueue_wait_ = std::move(enqueue_wait);
  report_ = std::move(report);
}

// Under the lock, so that the backend's completion (finish or fail, then
// releasing what enqueue_wait uses) waits for an enqueue under way.
bool WorkState::wait_on_device() {
  std::lock_guard lock(mu_);
  if (!enqueue_wait_ || error_) return false;  // a failure is raised by wait()
  if (done_ && !captured_) return true;
  if (!enqueue_wait_()) return false;
  device_waited_ = true;
  return true;
}

void WorkState::finish_captured() {
  {
    std::lock_guard lock(mu_);
    captured_ = true;
    done_ = true;
  }
  cv_.notify_all();
}

bool WorkState::done() const {
  std::lock_guard lock(mu_);
  return done_;
}

void WorkState::wait() const {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return done_; });
  if (error_) throw Error(*error_);
}

Work::Work() : state_(std::make_shared<WorkState>()) { state_->finish(); }

}  // namespace kiln::dist
