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
    KILN_CHECK(n >= 1, "KILN_NUM_THREADS='", env, "' must be a positive integer");
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
  KILN_CHECK(n >= 1, "set_num_threads: ", n, " must be at least 1");
  threads().store(n, std::memory_order_relaxed);
}

}  // namespace kiln
