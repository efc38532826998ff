// Chrome traces of profile captures, and their summary, on hand-built
// traces whose shares are worked out below.
#include "kiln/io/trace_summary.h"

#include <gtest/gtest.h>

#include "kiln/base/error.h"
#include "kiln/io/chrome_trace.h"

namespace kiln {
namespace {

using nlohmann::json;

profile::Event span(const char* cat, const char* name, double ts, double dur, uint32_t thread) {
  profile::Event e;
  e.category = cat;
  e.name = name;
  e.ts_us = ts;
  e.dur_us = dur;
  e.thread = thread;
  return e;
}

// A capture of 100 us from t = 1000. The device queue (thread 0) runs a
// program over [10, 60) with a kernel over [15, 35) and a collective over
// [40, 50); the main thread's step spans [5, 80).
//   compute        program minus the collective: 50 - 10 = 40
//   communication  10
//   host gaps      device idle inside the step: [5, 10) + [60, 80) = 25
//   idle           the rest: [0, 5) + [80, 100) = 25
profile::Capture capture() {
  profile::Capture c;
  c.start_us = 1000;
  c.stop_us = 1100;
  c.threads = {{0, "device queue cpu"}, {1, "main"}};
  profile::Event k = span("kernel", "matmul", 1015, 20, 0);
  k.args = {{"flops", 2e4}, {"bytes", 4e3}, {"types", std::string("f32[2,2] -> f32[2,2]")}};
  c.events.push_back(k);
  c.events.push_back(span("comm", "all_reduce", 1040, 10, 0));
  c.events.push_back(span("program", "the step", 1010, 50, 0));
  c.events.push_back(span("step", "step 1", 1005, 75, 1));
  profile::Event s;
  s.phase = 's';
  s.category = "comm";
  s.name = "collective";
  s.ts_us = 1041;
  s.flow_id = 7;
  c.events.push_back(s);
  return c;
}

TEST(ChromeTrace, EventsAreRelativeToTheCaptureAndNamed) {
  json t = chrome_trace(capture(), 3, "kiln rank 3");
  const json& ev = t["traceEvents"];
  ASSERT_TRUE(ev.is_array());
  EXPECT_EQ(t["otherData"]["capture_us"], 100.0);
  int names = 0, spans = 0;
  for (const json& e : ev) {
    EXPECT_EQ(e["pid"], 3);
    if (e["ph"] == "M") {
      ++names;
      if (e["name"] == "process_name") {
        EXPECT_EQ(e["args"]["name"], "kiln rank 3");
      }
      continue;
    }
    if (e["name"] == "matmul") {
      EXPECT_EQ(e["ph"], "X");
      EXPECT_EQ(e["ts"], 15.0);
      EXPECT_EQ(e["dur"], 20.0);
      EXPECT_EQ(e["args"]["flops"], 2e4);
      EXPECT_EQ(e["args"]["types"], "f32[2,2] -> f32[2,2]");
    }
    if (e["ph"] == "s") {
      EXPECT_EQ(e["id"], 7);
    }
    spans += e["ph"] == "X";
  }
  EXPECT_EQ(names, 3);  // the process and two threads
  EXPECT_EQ(spans, 4);
}

TEST(TraceSummary, AttributesEachInstantToItsInnermostSpan) {
  TraceSummary s = summarize_trace(chrome_trace(capture(), 0, "kiln rank 0"));
  EXPECT_EQ(s.device_thread, "device queue cpu");
  EXPECT_EQ(s.steps, 1);
  EXPECT_DOUBLE_EQ(s.window_us, 100);
  EXPECT_DOUBLE_EQ(s.compute_us, 40);
  EXPECT_DOUBLE_EQ(s.communication_us, 10);
  EXPECT_DOUBLE_EQ(s.host_gap_us, 25);
  EXPECT_DOUBLE_EQ(s.idle_us, 25);
  ASSERT_EQ(s.ops.size(), 2u);
  EXPECT_EQ(s.ops[0].name, "matmul");
  EXPECT_EQ(s.ops[0].calls, 1);
  EXPECT_DOUBLE_EQ(s.ops[0].flops, 2e4);
  // 2e4 flops in 20 us: 1 GFLOP/s; 4e3 bytes: 0.2 GB/s.
  std::string text = format_summary(s, 10);
  EXPECT_NE(text.find("compute 40.0%, communication 10.0%, host gaps 25.0%, idle 25.0%"),
            std::string::npos) << text;
  EXPECT_NE(text.find("1.00      0.20"), std::string::npos) << text;
  json j = summary_json(s);
  EXPECT_EQ(j["ops"][1]["name"], "all_reduce");
}

TEST(TraceSummary, BadTracesAreNamed) {
  try {
    summarize_trace(json::object());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("traceEvents"), std::string::npos);
  }
  json no_device = {{"traceEvents", json::array({{{"ph", "X"}, {"name", "a"}, {"ts", 0},
                                                  {"dur", 1}, {"pid", 0}, {"tid", 0}}})}};
  try {
    summarize_trace(no_device);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no device queue track"), std::string::npos);
  }
  json bad_ts = {{"traceEvents", json::array({{{"ph", "X"}, {"name", "a"}, {"ts", "x"}}})}};
  try {
    summarize_trace(bad_ts);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("trace event 0 (\"a\") has no numeric 'ts'"),
              std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln
