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

  // Bounded run-ahead: each task holds its buffers until it has run, so a
  // host far ahead of the device would hold buffers that a program order
  // run frees (and the step's memory plan counts as freed). At most this
  // many tasks wait, holding at most kMaxHeldBytes between them (queued and
  // running); a task holding more than that waits for an idle queue, so
  // large ops run one at a time, as the plan assumes.
  static constexpr size_t kMaxPending = 32;
  static constexpr int64_t kMaxHeldBytes = int64_t(16) << 20;

  // `label` names the work in an error message ("op 'gather' (eager op #12)");
  // `held_bytes`: the bytes of the buffers the task holds (inputs, outputs).
  void enqueue(std::function<void()> task, std::string label, int64_t held_bytes = 0);
  // Waits until a task holding `held_bytes` may be enqueued: called before
  // allocating its outputs, so they are not allocated ahead of the limit.
  void make_room(int64_t held_bytes);
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
    int64_t held_bytes = 0;
  };
  void run();
  void push(Task task);
  bool has_room(int64_t held_bytes) const;  // with mu_ held
  std::string device_failure(const std::string& what);  // clears the tasks since the sync

  const std::string device_;
  std::mutex mu_;
  std::condition_variable work_cv_, idle_cv_, space_cv_;
  std::deque<Task> tasks_;
  bool busy_ = false;
  int64_t held_ = 0;  // the held_bytes of the queued and the running tasks
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
