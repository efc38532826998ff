// A device's in-order execution queue, run by its own thread. Strict eager
// enqueues work and returns at once; synchronize() waits and rethrows the
// first error, naming the op that raised it. After an error the queue drops
// the work behind it (its inputs may be garbage) until it is synchronised.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace kiln {

class DeviceQueue {
 public:
  // `device` names the queue's thread in profiles ("device queue cpu:0").
  explicit DeviceQueue(std::string device);
  ~DeviceQueue();
  DeviceQueue(const DeviceQueue&) = delete;
  DeviceQueue& operator=(const DeviceQueue&) = delete;

  // At most this many tasks wait; enqueue blocks while the queue is full.
  static constexpr size_t kMaxPending = 32;

  // `label` names the work in an error message ("op 'gather' (eager op #12)").
  void enqueue(std::function<void()> task, std::string label);
  // Waits for all enqueued work; throws kiln::Error for the first failure.
  void synchronize();

  // For a device whose tasks only launch work that runs on later (a CUDA
  // stream): synchronize() also runs `hook` on the queue thread, after the
  // work before it, to wait for the device and throw what it reported. The
  // error then names the tasks run since the last synchronisation, the only
  // ones that can have caused it. Set once, before the first task.
  void set_sync_hook(std::function<void()> hook);

  // The most task labels a device error names (the latest ones).
  static constexpr size_t kNamedTasks = 8;

 private:
  struct Task {
    std::function<void()> fn;
    std::string label;
    bool sync = false;  // runs the sync hook
  };
  void run();
  void push(Task task);
  std::string device_failure(const std::string& what);  // clears the tasks since the sync

  const std::string device_;
  std::mutex mu_;
  std::condition_variable work_cv_, idle_cv_, space_cv_;
  std::deque<Task> tasks_;
  bool busy_ = false;
  bool stop_ = false;
  std::string error_;  // first failure since the last synchronize
  std::function<void()> sync_hook_;
  // Only with a sync hook, touched by the queue thread alone: the labels of
  // the latest tasks run since the last synchronisation, and their count.
  std::deque<std::string> since_sync_;
  int64_t run_since_sync_ = 0;
  std::thread thread_;
};

}  // namespace kiln
