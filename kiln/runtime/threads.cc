#include "kiln/runtime/threads.h"

#include <atomic>
#include <cstdlib>
#include <thread>

#include "kiln/base/error.h"

namespace kiln {
namespace {

int initial_threads() {
  if (const char* env = std::getenv("KILN_NUM_THREADS")) {
    int n = std::atoi(env);
    KILN_CHECK(n >= 1 && n <= kMaxThreads, "KILN_NUM_THREADS='", env,
               "' must be an integer from 1 to ", kMaxThreads);
    return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

std::atomic<int>& threads() {
  static std::atomic<int> n{initial_threads()};
  return n;
}

}  // namespace

int num_threads() { return threads().load(std::memory_order_relaxed); }

void set_num_threads(int n) {
  KILN_CHECK(n >= 1 && n <= kMaxThreads, "set_num_threads: ", n, " must be from 1 to ",
             kMaxThreads);
  threads().store(n, std::memory_order_relaxed);
}

}  // namespace kiln
