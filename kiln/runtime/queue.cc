#include "kiln/runtime/queue.h"

#include "kiln/base/error.h"
#include "kiln/base/profile.h"
#include "kiln/runtime/device_fault.h"
#include "kiln/runtime/kernel.h"

namespace kiln {

DeviceQueue::DeviceQueue(std::string device)
    : device_(std::move(device)), thread_([this] { run(); }) {}

DeviceQueue::~DeviceQueue() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  thread_.join();
}

void DeviceQueue::set_sync_hook(std::function<void()> hook) {
  std::lock_guard lock(mu_);
  sync_hook_ = std::move(hook);
}

void DeviceQueue::enqueue(std::function<void()> task, std::string label, int64_t held_bytes) {
  push({std::move(task), std::move(label), false, held_bytes});
}

bool DeviceQueue::has_room(int64_t held_bytes) const {
  if (tasks_.size() >= kMaxPending) return false;
  return (tasks_.empty() && !busy_) || held_ + held_bytes <= kMaxHeldBytes;
}

void DeviceQueue::make_room(int64_t held_bytes) {
  std::unique_lock lock(mu_);
  if (std::this_thread::get_id() != thread_.get_id())
    space_cv_.wait(lock, [&] { return has_room(held_bytes); });
}

void DeviceQueue::push(Task task) {
  {
    std::unique_lock lock(mu_);
    // The queue's own tasks enqueue without waiting (it would wait on itself).
    if (std::this_thread::get_id() != thread_.get_id())
      space_cv_.wait(lock, [&] { return has_room(task.held_bytes); });
    held_ += task.held_bytes;
    tasks_.push_back(std::move(task));
  }
  work_cv_.notify_one();
}

void DeviceQueue::synchronize() {
  bool hook;
  {
    std::lock_guard lock(mu_);
    hook = bool(sync_hook_);
  }
  if (hook) push({nullptr, "synchronisation", true});
  std::unique_lock lock(mu_);
  idle_cv_.wait(lock, [&] { return tasks_.empty() && !busy_; });
  if (!error_.empty()) {
    std::string e = std::move(error_);
    error_.clear();
    throw Error(e);
  }
}

std::string DeviceQueue::device_failure(const std::string& what) {
  std::string named;
  for (const std::string& l : since_sync_) named += (named.empty() ? "" : ", ") + l;
  const int64_t n = run_since_sync_;
  const bool all_named = n == int64_t(since_sync_.size());
  since_sync_.clear();
  run_since_sync_ = 0;
  if (n == 0) return cat("the device reported an error at synchronisation: ", what);
  if (n == 1) return cat(named, " failed on the device: ", what);
  return cat("the device failed in one of the ", n, " tasks run since the last synchronisation (",
             all_named ? "" : cat("the last ", kNamedTasks, ": "), named,
             "); KILN_EAGER_MODE=debug synchronises after every op and names the one: ", what);
}

void DeviceQueue::run() {
  profile::set_thread_name("device queue " + device_);
  std::unique_lock lock(mu_);
  while (true) {
    work_cv_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
    if (tasks_.empty()) return;  // stop requested and drained
    Task task = std::move(tasks_.front());
    tasks_.pop_front();
    space_cv_.notify_all();
    // Synchronisations always run: the device must be waited for even
    // after an error (its buffers are reused once the host moves on).
    bool skip = !error_.empty() && !task.sync;
    busy_ = true;
    const std::function<void()>* hook = task.sync ? &sync_hook_ : nullptr;
    const bool track = bool(sync_hook_);
    lock.unlock();
    std::string failure;
    if (hook) {
      try {
        (*hook)();
        since_sync_.clear();
        run_since_sync_ = 0;
      } catch (const std::exception& e) {
        failure = device_failure(e.what());
      }
    } else if (!skip) {
      if (track) {
        since_sync_.push_back(task.label);
        if (since_sync_.size() > kNamedTasks) since_sync_.pop_front();
        ++run_since_sync_;
      }
      try {
        task.fn();
      } catch (const DeviceFault& e) {
        failure = device_failure(e.what());
      } catch (const std::exception& e) {
        failure = cat(task.label, " failed: ", e.what());
      }
      // The tasks behind a failure are dropped, the waits for what earlier
      // ones started among them: that work ends now, while the dropped
      // tasks still hold its buffers.
      if (!failure.empty()) drain_in_flight();
    }
    task.fn = nullptr;  // release the buffers it holds outside the lock
    lock.lock();
    busy_ = false;
    held_ -= task.held_bytes;
    space_cv_.notify_all();
    if (!failure.empty() && error_.empty()) error_ = std::move(failure);
    if (tasks_.empty()) idle_cv_.notify_all();
  }
}

}  // namespace kiln
