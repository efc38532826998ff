#include "kiln/runtime/queue.h"

#include "kiln/base/error.h"

namespace kiln {

DeviceQueue::DeviceQueue() : thread_([this] { run(); }) {}

DeviceQueue::~DeviceQueue() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  thread_.join();
}

void DeviceQueue::enqueue(std::function<void()> task, std::string label) {
  {
    std::unique_lock lock(mu_);
    // Bounded run-ahead: each queued task holds its buffers, so a host far
    // ahead of the device would hold a whole step's activations at once.
    if (std::this_thread::get_id() != thread_.get_id())
      space_cv_.wait(lock, [&] { return tasks_.size() < kMaxPending; });
    tasks_.push_back({std::move(task), std::move(label)});
  }
  work_cv_.notify_one();
}

void DeviceQueue::synchronize() {
  std::unique_lock lock(mu_);
  idle_cv_.wait(lock, [&] { return tasks_.empty() && !busy_; });
  if (!error_.empty()) {
    std::string e = std::move(error_);
    error_.clear();
    throw Error(e);
  }
}

void DeviceQueue::run() {
  std::unique_lock lock(mu_);
  while (true) {
    work_cv_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
    if (tasks_.empty()) return;  // stop requested and drained
    Task task = std::move(tasks_.front());
    tasks_.pop_front();
    space_cv_.notify_one();
    bool skip = !error_.empty();
    busy_ = true;
    lock.unlock();
    std::string failure;
    if (!skip) {
      try {
        task.fn();
      } catch (const std::exception& e) {
        failure = cat(task.label, " failed: ", e.what());
      }
    }
    task.fn = nullptr;  // release the buffers it holds outside the lock
    lock.lock();
    busy_ = false;
    if (!failure.empty() && error_.empty()) error_ = std::move(failure);
    if (tasks_.empty()) idle_cv_.notify_all();
  }
}

}  // namespace kiln
