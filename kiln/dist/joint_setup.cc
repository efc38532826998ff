#include "kiln/dist/joint_setup.h"

#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "kiln/base/error.h"

namespace kiln::dist {

void agree_on(ProcessGroup& group, const std::string& what, const std::string& problem) {
  const std::vector<std::string> problems = all_gather_text(group, problem);
  // When every rank fails alike, one line says so.
  const std::string failed = world_ranks_by_text(group, problems);
  if (!failed.empty()) fail(what, " on ", group.describe(), " failed: ", failed);
}

std::string problem_of(const std::function<void()>& step) {
  try {
    step();
  } catch (const std::exception& e) {
    return *e.what() ? e.what() : "an error with no message";
  } catch (...) {
    return "an exception that is not a std::exception";
  }
  return "";
}

void run_and_agree(ProcessGroup& group, const std::string& what, bool here,
                   const std::function<void()>& step) {
  if (group.size() == 1) {
    if (here) step();
    return;
  }
  agree_on(group, what, here ? problem_of(step) : "");
}

namespace {

// Runs `undo` with its error dropped: the failure being raised says more.
void quietly(const std::function<void()>& undo) {
  if (!undo) return;
  try {
    undo();
  } catch (...) {
  }
}

}  // namespace

void joint_setup(ProcessGroup& group, const std::string& what, std::function<void()> step,
                 std::function<void()> undo) {
  struct Outcome {
    std::mutex mu;
    std::condition_variable cv;
    bool returned = false;
    bool abandoned = false;  // no longer waited for: the step's thread undoes a late success
    std::string problem;
  };
  const std::chrono::milliseconds timeout = group.timeout();
  auto outcome = std::make_shared<Outcome>();
  std::thread([outcome, step = std::move(step), undo] {
    std::string problem = problem_of(step);
    bool abandoned = false;
    {
      std::lock_guard lock(outcome->mu);
      outcome->returned = true;
      abandoned = outcome->abandoned;
      outcome->problem = std::move(problem);
      outcome->cv.notify_all();
    }
    if (abandoned && outcome->problem.empty()) quietly(undo);
  }).detach();

  std::string problem;
  bool succeeded = false;
  {
    std::unique_lock lock(outcome->mu);
    if (outcome->cv.wait_for(lock, timeout, [&] { return outcome->returned; })) {
      problem = outcome->problem;
      succeeded = problem.empty();
    } else {
      outcome->abandoned = true;
      problem = cat("it did not return within ", timeout.count(),
                    " ms (a peer that died or hung during it?)");
    }
  }
  // A member whose step returned at once enters the exchange up to one
  // timeout before one whose step did not return: the exchange waits twice
  // as long.
  group.set_timeout(2 * timeout);
  struct Restore {
    ProcessGroup& g;
    std::chrono::milliseconds t;
    ~Restore() { g.set_timeout(t); }
  } restore{group, timeout};
  try {
    agree_on(group, what, problem);
  } catch (const Error&) {
    if (succeeded) quietly(undo);
    throw;
  }
}

}  // namespace kiln::dist
