// dist::Work's wait ordered on the device (wait_on_device): taken only where
// the group set it up and the operation has not failed, and a failure after
// it goes to the group's report (raised at the device's next
// synchronisation); the completion waits for an enqueue under way, as the
// backend frees what the enqueue uses once it has completed the work; work a
// CUDA graph captured is done for the host yet still ordered on the device.
#include "kiln/dist/work.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "kiln/base/error.h"

namespace kiln::dist {
namespace {

struct DeviceWait {
  int enqueued = 0;
  std::vector<std::string> reported;
  bool can = true;  // the caller is the device's queue thread

  std::shared_ptr<WorkState> work() {
    auto s = std::make_shared<WorkState>();
    s->set_device_wait([this] { return can && ++enqueued > 0; },
                       [this](const std::string& why) { reported.push_back(why); });
    return s;
  }
};

TEST(Work, WithoutADeviceWaitTheHostWaits) {
  auto s = std::make_shared<WorkState>();
  EXPECT_FALSE(Work(s).wait_on_device());
  EXPECT_FALSE(Work().wait_on_device());
}

TEST(Work, AFailureAfterADeviceWaitIsReported) {
  DeviceWait d;
  auto s = d.work();
  EXPECT_TRUE(Work(s).wait_on_device());
  EXPECT_EQ(d.enqueued, 1);
  s->fail("all_reduce of 8 f32 elements on dp failed");
  EXPECT_EQ(d.reported, std::vector<std::string>{"all_reduce of 8 f32 elements on dp failed"});
  EXPECT_THROW(Work(s).wait(), Error);
}

TEST(Work, OffTheQueueThreadOrAfterAFailureTheHostWaits) {
  DeviceWait d;
  d.can = false;
  auto s = d.work();
  EXPECT_FALSE(Work(s).wait_on_device());
  s->fail("timed out");
  EXPECT_TRUE(d.reported.empty()) << "the host's wait() raises it";

  DeviceWait e;
  auto failed = e.work();
  failed->fail("timed out");
  EXPECT_FALSE(Work(failed).wait_on_device()) << "so that wait() raises the failure";
  EXPECT_EQ(e.enqueued, 0);
  EXPECT_TRUE(e.reported.empty());
}

TEST(Work, DoneWorkNeedsNoDeviceWait) {
  DeviceWait d;
  auto s = d.work();
  s->finish();
  EXPECT_TRUE(Work(s).wait_on_device());
  EXPECT_EQ(d.enqueued, 0);
}

TEST(Work, CapturedWorkIsDoneForTheHostAndStillWaitedOnTheDevice) {
  DeviceWait d;
  auto s = d.work();
  s->finish_captured();
  EXPECT_TRUE(Work(s).done());
  Work(s).wait();  // returns: a failed capture's drain never hangs
  EXPECT_TRUE(Work(s).wait_on_device());
  EXPECT_EQ(d.enqueued, 1) << "the graph's later work must wait for the captured collective";
}

TEST(Work, CompletionWaitsForAnEnqueueUnderWay) {
  auto s = std::make_shared<WorkState>();
  std::atomic<bool> entered{false}, left{false};
  s->set_device_wait(
      [&] {
        entered = true;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        left = true;
        return true;
      },
      [](const std::string&) {});
  bool left_when_finished = false;
  std::thread completer([&] {
    while (!entered) std::this_thread::yield();
    s->finish();
    left_when_finished = left;
  });
  EXPECT_TRUE(Work(s).wait_on_device());
  completer.join();
  EXPECT_TRUE(left_when_finished);
}

}  // namespace
}  // namespace kiln::dist
