// The device queue's synchronisation hook: what a device that runs work
// after its tasks return (a CUDA stream) reports at synchronize() or a task
// meets later (a DeviceFault), and which tasks the error names; and its
// bounded run-ahead, in tasks and in the bytes they hold.
#include "kiln/runtime/queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <thread>

#include "kiln/base/error.h"
#include "kiln/runtime/device_fault.h"

namespace kiln {
namespace {

std::string sync_error(DeviceQueue& q) {
  try {
    q.synchronize();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(DeviceQueue, SyncHookRunsAtEverySynchronisation) {
  DeviceQueue q("test");
  std::atomic<int> syncs = 0;
  q.set_sync_hook([&] { ++syncs; });
  q.synchronize();
  q.enqueue([] {}, "op 'a' (eager op #1)");
  q.synchronize();
  EXPECT_EQ(syncs, 2);
}

TEST(DeviceQueue, ADeviceErrorAfterOneTaskNamesIt) {
  DeviceQueue q("test");
  bool fault = false;
  q.set_sync_hook([&] {
    if (fault) fail("illegal address");
  });
  q.enqueue([] {}, "op 'a' (eager op #1)");
  q.synchronize();
  fault = true;
  q.enqueue([] {}, "op 'b' (eager op #2)");
  EXPECT_EQ(sync_error(q), "op 'b' (eager op #2) failed on the device: illegal address");
}

TEST(DeviceQueue, ADeviceErrorNamesTheTasksSinceTheLastSynchronisation) {
  DeviceQueue q("test");
  bool fault = false;
  q.set_sync_hook([&] {
    if (fault) fail("illegal address");
  });
  q.enqueue([] {}, "op 'before'");
  q.synchronize();
  for (int i = 0; i < 10; ++i) q.enqueue([] {}, "op #" + std::to_string(i));
  fault = true;
  std::string e = sync_error(q);
  EXPECT_NE(e.find("one of the 10 tasks run since the last synchronisation (the last 8: op #2, "),
            std::string::npos) << e;
  EXPECT_NE(e.find("op #9); KILN_EAGER_MODE=debug"), std::string::npos) << e;
  EXPECT_EQ(e.find("before"), std::string::npos) << e;
  EXPECT_NE(e.find(": illegal address"), std::string::npos) << e;
  fault = false;
  EXPECT_EQ(sync_error(q), "");  // reported once
}

TEST(DeviceQueue, TheDeviceIsWaitedForEvenAfterATaskFailed) {
  DeviceQueue q("test");
  std::atomic<int> syncs = 0;
  q.set_sync_hook([&] { ++syncs; });
  q.enqueue([] { fail("bad launch"); }, "op 'x' (eager op #3)");
  q.enqueue([] { ADD_FAILURE() << "work behind an error must be dropped"; }, "op 'y'");
  EXPECT_EQ(sync_error(q), "op 'x' (eager op #3) failed: bad launch");
  EXPECT_EQ(syncs, 1);
}

// A fault of earlier work met by a later task's call (CUDA's sticky
// errors) names the tasks since the last synchronisation, not that task.
TEST(DeviceQueue, ADeviceFaultMetByATaskNamesTheTasksSinceTheLastSynchronisation) {
  DeviceQueue q("test");
  q.set_sync_hook([] {});
  q.enqueue([] {}, "op 'a'");
  q.enqueue([] { throw DeviceFault("illegal address"); }, "op 'b'");
  q.enqueue([] { ADD_FAILURE() << "work behind an error must be dropped"; }, "op 'c'");
  EXPECT_EQ(sync_error(q),
            "the device failed in one of the 2 tasks run since the last synchronisation (op 'a', "
            "op 'b'); KILN_EAGER_MODE=debug synchronises after every op and names the one: "
            "illegal address");
}

// A task that runs once `open` is set, holding `bytes` until then.
void enqueue_gated(DeviceQueue& q, std::atomic<bool>& open, int64_t bytes) {
  q.enqueue([&open] {
    while (!open) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }, "gated", bytes);
}

// Whether `room` is still waiting after a while (it never returns early
// when the queue is right; when it is wrong, it returns at once).
bool still_waiting(std::future<void>& room) {
  return room.wait_for(std::chrono::milliseconds(100)) == std::future_status::timeout;
}

TEST(DeviceQueue, TasksHoldAtMostTheByteLimitBetweenThem) {
  DeviceQueue q("test");
  std::atomic<bool> open = false;
  const int64_t half = DeviceQueue::kMaxHeldBytes / 2;
  enqueue_gated(q, open, half);
  q.make_room(half);  // fits beside the running task
  enqueue_gated(q, open, half);
  auto room = std::async(std::launch::async, [&] { q.make_room(1); });
  EXPECT_TRUE(still_waiting(room)) << "a third task would pass the byte limit";
  open = true;
  room.get();
  q.synchronize();
}

TEST(DeviceQueue, ATaskOverTheByteLimitWaitsForAnIdleQueue) {
  DeviceQueue q("test");
  std::atomic<bool> open = false;
  q.make_room(4 * DeviceQueue::kMaxHeldBytes);  // an idle queue takes any task
  enqueue_gated(q, open, 4 * DeviceQueue::kMaxHeldBytes);
  auto room = std::async(std::launch::async, [&] { q.make_room(1); });
  EXPECT_TRUE(still_waiting(room));
  open = true;
  room.get();
  // Tasks holding nothing wait only for a free place.
  for (size_t i = 0; i < DeviceQueue::kMaxPending; ++i) q.enqueue([] {}, "empty");
  q.synchronize();
}

}  // namespace
}  // namespace kiln
