// The profiler's event log: nothing is recorded without a capture, spans
// carry their arguments and nest on their thread, other threads' events
// arrive named, a span still open at the stop is left out, and flow events
// keep their ids.
#include "kiln/base/profile.h"

#include <gtest/gtest.h>

#include <optional>
#include <thread>

#include "kiln/base/error.h"

namespace kiln::profile {
namespace {

const Event* find(const Capture& c, const std::string& name) {
  for (const Event& e : c.events)
    if (e.name == name) return &e;
  return nullptr;
}

TEST(Profile, NothingIsRecordedWithoutACapture) {
  { Span s("kernel", "before"); }
  EXPECT_FALSE(active());
  start();
  EXPECT_TRUE(active());
  { Span s("kernel", "during"); }
  Capture c = stop();
  EXPECT_FALSE(active());
  { Span s("kernel", "after"); }
  EXPECT_EQ(c.events.size(), 1u);
  EXPECT_NE(find(c, "during"), nullptr);
  start();
  EXPECT_TRUE(stop().events.empty());  // "after" was not kept for the next capture
}

TEST(Profile, SpansNestAndCarryTheirArguments) {
  start();
  {
    Span outer("program", "outer");
    {
      Span inner("kernel", "inner");
      inner.arg("flops", 12.0);
      inner.arg("types", std::string("f32[2] -> f32[2]"));
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  Capture c = stop();
  const Event *outer = find(c, "outer"), *inner = find(c, "inner");
  ASSERT_TRUE(outer && inner);
  EXPECT_EQ(outer->category, "program");
  EXPECT_EQ(outer->thread, inner->thread);
  EXPECT_LE(outer->ts_us, inner->ts_us);
  EXPECT_GE(outer->ts_us + outer->dur_us, inner->ts_us + inner->dur_us);
  EXPECT_GE(inner->dur_us, 1000.0);
  ASSERT_EQ(inner->args.size(), 2u);
  EXPECT_EQ(std::get<double>(inner->args[0].second), 12.0);
  EXPECT_EQ(std::get<std::string>(inner->args[1].second), "f32[2] -> f32[2]");
  EXPECT_GE(c.stop_us, inner->ts_us + inner->dur_us);
  EXPECT_LE(c.start_us, outer->ts_us);
}

TEST(Profile, OtherThreadsArriveUnderTheirNames) {
  start();
  uint32_t worker = 0;
  std::thread t([&] {
    set_thread_name("worker");
    Span s("compile", "job");
  });
  t.join();
  Capture c = stop();
  const Event* job = find(c, "job");
  ASSERT_TRUE(job);
  worker = job->thread;
  EXPECT_EQ(c.threads.at(worker), "worker");
}

TEST(Profile, ASpanOpenAtTheStopIsLeftOut) {
  start();
  std::optional<Span> open;
  open.emplace("step", "open");
  Capture c = stop();
  open.reset();
  EXPECT_EQ(find(c, "open"), nullptr);
  start();
  EXPECT_EQ(find(stop(), "open"), nullptr);
}

TEST(Profile, FlowEventsKeepTheirIds) {
  start();
  uint64_t id = new_flow_id();
  flow('s', id, "comm", "collective");
  flow('f', id, "comm", "collective");
  Capture c = stop();
  ASSERT_EQ(c.events.size(), 2u);
  EXPECT_EQ(c.events[0].phase, 's');
  EXPECT_EQ(c.events[1].phase, 'f');
  EXPECT_EQ(c.events[0].flow_id, id);
  EXPECT_EQ(c.events[1].flow_id, id);
  EXPECT_NE(new_flow_id(), id);
}

TEST(Profile, StartAndStopOutOfOrderAreErrors) {
  EXPECT_THROW(stop(), Error);
  start();
  EXPECT_THROW(start(), Error);
  stop();
}

}  // namespace
}  // namespace kiln::profile
