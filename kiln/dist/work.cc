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
    error_ = std::move(message);
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
