// `kiln train --profiler.enable_profiling` as a user runs it: every
// profile_freq steps a Chrome trace of the last active_steps appears, its
// spans nest per thread, the graph trainer's kernels lie inside its program,
// the first trace shows the step's compile and a later one none, and
// `kiln profile summarize` accounts for all of the capture. A run without
// the flag writes no trace.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "tests/support/cli.h"
#include "tests/support/temp_dir.h"
#include "tests/support/trace_checks.h"
#include "tests/support/train_run.h"

namespace kiln::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class ProfilerE2E : public ::testing::Test {
 protected:
  void SetUp() override { write_grammar_corpus(tmp_ / "corpus.txt", 400); }

  std::string train(const std::string& dump, const std::string& flags) {
    return "train --config llama3_debug --data.path " + (tmp_ / "corpus.txt") +
           " --data.text_split line --training.seq_len 32 --training.local_batch_size 4"
           " --lr_scheduler.warmup_steps 1 --job.dump_folder " + dump + " " + flags;
  }

  TempDir tmp_;
};

std::set<std::string> entries(const fs::path& dir) {
  std::set<std::string> s;
  for (const auto& e : fs::directory_iterator(dir)) s.insert(e.path().filename().string());
  return s;
}

bool has_span(const json& trace, const std::string& cat, const std::string& name) {
  for (const json& e : trace_spans(trace, cat))
    if (e["name"] == name) return true;
  return false;
}

TEST_F(ProfilerE2E, TheGraphTrainerWritesNestedTracesThatTheSummaryAccountsFor) {
  std::string dump = tmp_ / "graph";
  CliRun r = run_cli(train(dump, "--training.steps 4 --compile.graph_trainer"
                                 " --validation.enable=false --checkpoint.enable=false"
                                 " --profiler.enable_profiling --profiler.profile_freq 2"
                                 " --profiler.active_steps 2"));
  ASSERT_EQ(r.status, 0) << r.output;
  fs::path traces = fs::path(dump) / "profile_traces";
  EXPECT_EQ(entries(traces), (std::set<std::string>{"step-2", "step-4"}));
  EXPECT_NE(r.output.find("wrote profile trace " + (traces / "step-2" / "trace.json").string()),
            std::string::npos) << r.output;

  for (int step : {2, 4}) {
    std::string path = (traces / ("step-" + std::to_string(step)) / "trace.json").string();
    SCOPED_TRACE(path);
    json t = read_trace(path);
    expect_spans_nest(t);
    // Only the step's scalar inputs (`full`s) are made outside its program.
    EXPECT_GT(expect_kernels_inside_programs(t), 0.5);
    for (const json& k : trace_spans(t, "kernel"))
      if (!k.contains("args") || !k["args"].contains("program")) EXPECT_EQ(k["name"], "full") << k.dump();
    EXPECT_EQ(trace_spans(t, "step").size(), 2u);
    EXPECT_EQ(trace_spans(t, "program").size(), 2u);  // the whole step, once a step
    EXPECT_TRUE(has_span(t, "data", "next batch"));
    bool matmul = false;
    for (const json& k : trace_spans(t, "kernel"))
      if (k["name"] == "matmul") {
        matmul = true;
        EXPECT_GT(k["args"]["flops"].get<double>(), 0) << k.dump();
        EXPECT_NE(k["args"]["types"].get<std::string>().find(" -> "), std::string::npos);
      }
    EXPECT_TRUE(matmul);
    // Step 1 compiles the step; step 4 finds it compiled.
    EXPECT_EQ(has_span(t, "compile", "program"), step == 2);

    CliRun s = run_cli("profile summarize --json " + path);
    ASSERT_EQ(s.status, 0) << s.output;
    json sum = json::parse(s.output);
    double shares = sum["compute_us"].get<double>() + sum["communication_us"].get<double>() +
                    sum["host_gap_us"].get<double>() + sum["idle_us"].get<double>();
    EXPECT_NEAR(shares, sum["window_us"].get<double>(), 1e-6 * sum["window_us"].get<double>());
    EXPECT_GT(sum["compute_us"].get<double>(), 0);
    EXPECT_EQ(sum["steps"], 2);
  }
  CliRun text = run_cli("profile summarize " + (traces / "step-4" / "trace.json").string());
  EXPECT_EQ(text.status, 0) << text.output;
  EXPECT_NE(text.output.find("time: compute "), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("matmul"), std::string::npos) << text.output;
}

TEST_F(ProfilerE2E, EagerStepsShowTheirDataAndCheckpointsAndNest) {
  std::string dump = tmp_ / "eager";
  CliRun r = run_cli(train(dump, "--training.steps 3 --compile.graph_trainer=false"
                                 " --checkpoint.enable --checkpoint.interval 3"
                                 " --validation.enable --validation.freq 3 --validation.steps 1"
                                 " --profiler.enable_profiling --profiler.profile_freq 3"
                                 " --profiler.active_steps 1"));
  ASSERT_EQ(r.status, 0) << r.output;
  json t = read_trace((fs::path(dump) / "profile_traces" / "step-3" / "trace.json").string());
  expect_spans_nest(t);
  EXPECT_EQ(trace_spans(t, "step").size(), 1u);
  EXPECT_TRUE(has_span(t, "checkpoint", "save"));
  EXPECT_TRUE(has_span(t, "data", "next validation batch")) << r.output;
  EXPECT_GT(trace_spans(t, "kernel").size(), 100u);
  EXPECT_EQ(expect_kernels_inside_programs(t), 0.0);  // strict eager: no programs
}

size_t cache_entries(const fs::path& dir) {
  size_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) n += e.path().extension() == ".kce";
  return n;
}

// A one-step run leaves every program and kernel it compiled in the disk
// cache (it waits for the background builds still running at its end), so
// a second process with the same cache directory compiles nothing: its
// compiles are hits and the cache gains no entry.
TEST_F(ProfilerE2E, ASecondProcessWithTheSameCacheCompilesNothing) {
  const std::string flags = "--training.steps 1 --compile.graph_trainer --validation.enable=false"
                            " --checkpoint.enable=false --profiler.enable_profiling"
                            " --profiler.profile_freq 1 --profiler.active_steps 1";
  auto env = [&](const char* l2) {
    return "KILN_CACHE_DIR=" + (tmp_ / "l3") + " KILN_L2_CACHE_DIR=" + (tmp_ / l2);
  };
  CliRun first = run_cli(train(tmp_ / "first", flags), env("l2-first"));
  ASSERT_EQ(first.status, 0) << first.output;
  const size_t entries = cache_entries(tmp_ / "l3");
  EXPECT_GT(entries, 1u);  // the step's program and its fused kernels
  CliRun second = run_cli(train(tmp_ / "second", flags), env("l2-second"));
  ASSERT_EQ(second.status, 0) << second.output;
  auto compiles = [&](const char* run) {
    std::string path = (fs::path(tmp_ / run) / "profile_traces" / "step-1" / "trace.json").string();
    return trace_spans(read_trace(path), "compile");
  };
  EXPECT_FALSE(compiles("first").empty());
  std::vector<json> again = compiles("second");
  EXPECT_FALSE(again.empty());
  for (const json& c : again)
    EXPECT_NE(c["args"]["cache"].get<std::string>().find("hit"), std::string::npos) << c.dump();
  EXPECT_EQ(cache_entries(tmp_ / "l3"), entries) << second.output;
}

TEST_F(ProfilerE2E, WithoutTheFlagNothingIsWritten) {
  std::string dump = tmp_ / "off";
  CliRun r = run_cli(train(dump, "--training.steps 2 --profiler.profile_freq 1"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_FALSE(fs::exists(fs::path(dump) / "profile_traces"));
  EXPECT_EQ(r.output.find("profile trace"), std::string::npos) << r.output;
}

TEST_F(ProfilerE2E, BadSettingsAndTracesAreNamed) {
  CliRun r = run_cli(train(tmp_ / "bad", "--training.steps 2 --profiler.enable_profiling"
                                         " --profiler.profile_freq 2 --profiler.active_steps 3"));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("profiler.active_steps: must be between 1 and profiler.profile_freq "
                          "(2), got 3"), std::string::npos) << r.output;
  CliRun missing = run_cli("profile summarize " + (tmp_ / "none.json"));
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.output.find("cannot open the trace"), std::string::npos) << missing.output;
  std::string not_json = tmp_.write("bad.json", "{\"traceEvents\": [");
  CliRun bad = run_cli("profile summarize " + not_json);
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.output.find("is not JSON"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace kiln::test
