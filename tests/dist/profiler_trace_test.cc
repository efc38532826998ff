// The profiler under mpirun: each rank writes its own trace (its rank as
// the process), the FSDP step's collectives show as communication spans on
// the device queue, every collective's start has an arrow to its wait, and
// the summary counts communication time.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "tests/support/cli.h"
#include "tests/support/mesh_runs.h"
#include "tests/support/temp_dir.h"
#include "tests/support/trace_checks.h"
#include "tests/support/train_run.h"

namespace kiln::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

TEST(ProfilerTrace, EachRankTracesItsCollectivesWithArrowsFromStartToWait) {
  TempDir tmp;
  write_grammar_corpus(tmp / "corpus.txt", 400);
  std::string dump = tmp / "fsdp";
  CliRun r = run_cli(
      "train --config llama3_debug --data.path " + (tmp / "corpus.txt") +
          " --data.text_split line --training.seq_len 32 --training.local_batch_size 2"
          " --training.steps 2 --validation.enable=false --checkpoint.enable=false"
          " --compile.graph_trainer"
          " --parallelism.data_parallel_shard_degree 2 --compile.spmd_safe=true"
          " --compile.overlap_collectives=true --profiler.enable_profiling"
          " --profiler.profile_freq 2 --profiler.active_steps 1 --job.dump_folder " + dump,
      mpirun(2));
  ASSERT_EQ(r.status, 0) << r.output;
  fs::path step = fs::path(dump) / "profile_traces" / "step-2";
  for (int rank : {0, 1}) {
    std::string path = (step / ("rank" + std::to_string(rank) + "_trace.json")).string();
    SCOPED_TRACE(path);
    json t = read_trace(path);
    expect_spans_nest(t);
    EXPECT_GT(expect_kernels_inside_programs(t), 0.9);
    for (const json& e : t["traceEvents"]) EXPECT_EQ(e["pid"], rank);
    std::vector<json> comm = trace_spans(t, "comm");
    EXPECT_FALSE(comm.empty());
    std::map<int64_t, int> starts, waits;
    for (const json& e : t["traceEvents"]) {
      if (e["ph"] == "s") ++starts[e["id"].get<int64_t>()];
      if (e["ph"] == "f") ++waits[e["id"].get<int64_t>()];
    }
    EXPECT_FALSE(starts.empty()) << "overlapped collectives start and wait apart";
    EXPECT_EQ(starts, waits);
    for (const json& e : comm)
      if (e["name"] != "collective_wait") {
        EXPECT_TRUE(e["args"].contains("group")) << e.dump();
      }

    CliRun s = run_cli("profile summarize --json " + path);
    ASSERT_EQ(s.status, 0) << s.output;
    EXPECT_GT(json::parse(s.output)["communication_us"].get<double>(), 0);
  }
}

}  // namespace
}  // namespace kiln::test
