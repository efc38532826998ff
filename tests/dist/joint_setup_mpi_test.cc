// Joint setup steps (kiln/dist/joint_setup.h) on 2 and 4 ranks: steps that
// succeed everywhere pass; a step that throws on one rank, or never
// returns there, fails every rank with an error naming that rank and why,
// within the group's timeout, and the ranks whose step succeeded undo it
// (a step that succeeds late, on its own thread).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "kiln/base/error.h"
#include "kiln/dist/joint_setup.h"
#include "kiln/dist/world.h"
#include "tests/support/support.h"

namespace kiln::dist {
namespace {

using namespace std::chrono_literals;
using test::error_of;

TEST(JointSetup, StepsThatSucceedEverywherePass) {
  world()->set_timeout(60s);
  auto ran = std::make_shared<std::atomic<int>>(0);
  bool undone = false;
  joint_setup(*world(), "the test step", [ran] { ++*ran; }, [&] { undone = true; });
  EXPECT_EQ(*ran, 1);
  EXPECT_FALSE(undone);
}

TEST(JointSetup, AFailureOnOneRankFailsEveryRankNamingIt) {
  world()->set_timeout(60s);
  const bool bad = world()->rank() == 1;
  bool undone = false;
  const std::string m = error_of([&] {
    joint_setup(*world(), "the test step", [bad] { KILN_CHECK(!bad, "no device here"); },
                [&] { undone = true; });
  });
  EXPECT_NE(m.find("the test step on "), std::string::npos) << m;
  EXPECT_NE(m.find(" failed: world rank 1: no device here"), std::string::npos) << m;
  EXPECT_EQ(undone, !bad);  // what the others made is freed
  world()->barrier().wait();
}

TEST(JointSetup, EveryRankFailingAlikeIsOneLine) {
  world()->set_timeout(60s);
  std::string ranks = "0";
  for (int r = 1; r < world()->size(); ++r) ranks += ", " + std::to_string(r);
  const std::string m = error_of([] { agree_on(*world(), "the test step", "no GPU"); });
  EXPECT_NE(m.find("failed: world ranks " + ranks + ": no GPU"), std::string::npos) << m;
  EXPECT_EQ(m.find(';'), std::string::npos) << m;
}

// A step that never returns on rank 1 (a peer lost inside a library's
// bootstrap): every rank fails after the timeout, none waits for ever.
// Released then, it succeeds after all, and its own thread undoes it.
TEST(JointSetup, AStepThatNeverReturnsFailsEveryRankAfterTheTimeout) {
  world()->set_timeout(500ms);
  const bool stuck = world()->rank() == 1;
  auto release = std::make_shared<std::atomic<bool>>(false);
  auto undone = std::make_shared<std::atomic<bool>>(false);
  const auto start = std::chrono::steady_clock::now();
  const std::string m = error_of([&] {
    joint_setup(
        *world(), "the test step",
        [stuck, release] {
          while (stuck && !*release) std::this_thread::sleep_for(1ms);
        },
        [undone] { *undone = true; });
  });
  EXPECT_NE(m.find("world rank 1: it did not return within 500 ms"), std::string::npos) << m;
  EXPECT_LT(std::chrono::steady_clock::now() - start, 20s);
  if (stuck) {
    EXPECT_FALSE(*undone) << "still running: nothing made yet";
  }
  *release = true;  // the step's thread ends, having made what it makes
  for (int i = 0; i < 10000 && !*undone; ++i) std::this_thread::sleep_for(1ms);
  EXPECT_TRUE(*undone) << "every rank's step succeeded in the end, and each is undone";
  world()->set_timeout(60s);
  world()->barrier().wait();
}

}  // namespace
}  // namespace kiln::dist
