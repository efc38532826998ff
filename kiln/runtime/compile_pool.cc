#include "kiln/runtime/compile_pool.h"

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "kiln/base/profile.h"

namespace kiln {
namespace {

class Pool {
 public:
  Pool() {
    int n = std::clamp(int(std::thread::hardware_concurrency()) / 4, 1, 4);
    if (const char* env = std::getenv("KILN_FUSED_COMPILE_THREADS"))
      n = std::clamp(std::atoi(env), 1, 64);
    for (int i = 0; i < n; ++i) std::thread([this] { work(); }).detach();
  }
  void submit(std::function<void()> job) {
    {
      std::lock_guard lock(mu_);
      jobs_.push_back(std::move(job));
      ++pending_;
    }
    cv_.notify_one();
  }
  int pending() {
    std::lock_guard lock(mu_);
    return pending_;
  }
  void wait_idle() {
    std::unique_lock lock(mu_);
    idle_cv_.wait(lock, [&] { return pending_ == 0; });
  }

 private:
  void work() {
    profile::set_thread_name("compile pool");
    while (true) {
      std::function<void()> job;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return !jobs_.empty(); });
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
      std::lock_guard lock(mu_);
      if (--pending_ == 0) idle_cv_.notify_all();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_, idle_cv_;
  std::deque<std::function<void()>> jobs_;
  int pending_ = 0;  // queued or running
};

Pool& pool() {
  static Pool* p = new Pool;  // never destroyed: its threads are detached
  return *p;
}

}  // namespace

void submit_compile_job(std::function<void()> job) { pool().submit(std::move(job)); }

int pending_compile_jobs() { return pool().pending(); }

void wait_for_compile_jobs() { pool().wait_idle(); }

}  // namespace kiln
