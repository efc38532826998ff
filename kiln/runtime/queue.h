// A device's in-order execution queue, run by its own thread. Strict eager
// enqueues work and returns at once; synchronize() waits and rethrows the
// first error, naming the op that raised it. After an error the queue drops
// the work behind it (its inputs may be garbage) until it is synchronised.
#pragma once
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace kiln {

class DeviceQueue {
 public:
  DeviceQueue();
  ~DeviceQueue();
  DeviceQueue(const DeviceQueue&) = delete;
  DeviceQueue& operator=(const DeviceQueue&) = delete;

  // At most this many tasks wait; enqueue blocks while the queue is full.
  static constexpr size_t kMaxPending = 32;

  // `label` names the work in an error message ("op 'gather' (eager op #12)").
  void enqueue(std::function<void()> task, std::string label);
  // Waits for all enqueued work; throws kiln::Error for the first failure.
  void synchronize();

 private:
  struct Task {
    std::function<void()> fn;
    std::string label;
  };
  void run();

  std::mutex mu_;
  std::condition_variable work_cv_, idle_cv_, space_cv_;
  std::deque<Task> tasks_;
  bool busy_ = false;
  bool stop_ = false;
  std::string error_;  // first failure since the last synchronize
  std::thread thread_;
};

}  // namespace kiln
