#include "kiln/compiler/collective_schedule.h"

#include <algorithm>
#include <map>

#include "kiln/base/error.h"
#include "kiln/compiler/memory_plan.h"
#include "kiln/compiler/pipeline.h"
#include "tests/compiler/pass_test_util.h"

namespace kiln::compiler::test {
namespace {

// SimpleFSDP in miniature: four parameter shards gathered before the
// forward (collectives c0..c3), a forward chain reading one gathered
// parameter per layer, then four gradient-like matmuls whose
// reduce_scatters (c4..c7) were traced together at the end. Each
// collective's mesh_axis names it, so schedules can be read off.
const char* kFsdp = R"(
  graph(%0: f32[2,4], %1: f32[2,4], %2: f32[2,4], %3: f32[2,4], %4: f32[8,4]) {
    %5: f32[4,4] = all_gather(%0) {gather_dim=0, mesh_axis="c0", group_size=2}
    %6: f32[4,4] = all_gather(%1) {gather_dim=0, mesh_axis="c1", group_size=2}
    %7: f32[4,4] = all_gather(%2) {gather_dim=0, mesh_axis="c2", group_size=2}
    %8: f32[4,4] = all_gather(%3) {gather_dim=0, mesh_axis="c3", group_size=2}
    %9: f32[8,4] = matmul(%4, %5)
    %10: f32[8,4] = tanh(%9)
    %11: f32[8,4] = matmul(%10, %6)
    %12: f32[8,4] = tanh(%11)
    %13: f32[8,4] = matmul(%12, %7)
    %14: f32[8,4] = tanh(%13)
    %15: f32[8,4] = matmul(%14, %8)
    %16: f32[8,4] = tanh(%15)
    %17: f32[4,8] = permute(%16) {dims=[1,0]}
    %18: f32[4,4] = matmul(%17, %14)
    %19: f32[4,8] = permute(%14) {dims=[1,0]}
    %20: f32[4,4] = matmul(%19, %12)
    %21: f32[4,8] = permute(%12) {dims=[1,0]}
    %22: f32[4,4] = matmul(%21, %10)
    %23: f32[4,8] = permute(%10) {dims=[1,0]}
    %24: f32[4,4] = matmul(%23, %4)
    %25: f32[2,4] = reduce_scatter(%18) {scatter_dim=0, mesh_axis="c4", group_size=2}
    %26: f32[2,4] = reduce_scatter(%20) {scatter_dim=0, mesh_axis="c5", group_size=2}
    %27: f32[2,4] = reduce_scatter(%22) {scatter_dim=0, mesh_axis="c6", group_size=2}
    %28: f32[2,4] = reduce_scatter(%24) {scatter_dim=0, mesh_axis="c7", group_size=2}
    %29: f32[2,4] = add(%25, %26)
    %30: f32[2,4] = add(%29, %27)
    %31: f32[2,4] = add(%30, %28)
    return %31, %16
  })";

// HSDP's chain: each gradient is reduce_scattered, then all_reduced over the
// replicas; a collective feeding another, and a result returned unread.
const char* kChained = R"(
  graph(%0: f32[8,4], %1: f32[8,4]) {
    %2: f32[8,4] = tanh(%0)
    %3: f32[4,4] = reduce_scatter(%2) {scatter_dim=0, mesh_axis="c0", group_size=2}
    %4: f32[4,4] = all_reduce(%3) {mesh_axis="c1", group_size=2}
    %5: f32[8,4] = exp(%1)
    %6: f32[4,4] = reduce_scatter(%5) {scatter_dim=0, mesh_axis="c2", group_size=2}
    %7: f32[4,4] = all_reduce(%6) {mesh_axis="c3", group_size=2}
    %8: f32[4,4] = add(%4, %7)
    %9: f32[16,2] = all_to_all(%0) {split_dim=1, concat_dim=0, mesh_axis="c4", group_size=2}
    return %8, %9
  })";

bool is_start(const ir::Node& n) {
  return n.op->name.size() > 6 && n.op->name.ends_with("_start");
}
bool is_wait(const ir::Node& n) { return is_collective_wait(*n.op); }
// The collective index a start names ("c3" -> 3); a wait's, through its start.
int collective(const ir::Graph& g, const ir::Node& n) {
  const ir::Node& s = is_wait(n) ? g.nodes()[g.values()[n.inputs[0]].node] : n;
  return std::stoi(s.attrs.s("mesh_axis").substr(1));
}

// "S0 S1 W0 S2 matmul ...": starts, waits and the other ops in order.
std::string trace(const ir::Graph& g) {
  std::string s;
  for (const ir::Node& n : g.nodes()) {
    if (!s.empty()) s += " ";
    s += is_start(n) ? cat("S", collective(g, n))
         : is_wait(n) ? cat("W", collective(g, n))
                      : n.op->name;
  }
  return s;
}

// The properties every schedule has, whatever the options.
void check_schedule(const ir::Graph& before, const ir::Graph& after, const ScheduleOptions& o) {
  ir::verify(after);  // SSA: every value defined before it is read
  int collectives = 0;
  for (const ir::Node& n : before.nodes()) collectives += n.op->fusion == ir::FusionClass::collective;
  std::vector<int> starts, waits;
  int in_flight = 0;
  const auto& nodes = after.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const ir::Node& n = nodes[i];
    if (is_start(n)) starts.push_back(collective(after, n)), ++in_flight;
    if (is_wait(n)) {
      waits.push_back(collective(after, n)), --in_flight;
      // Nothing reads the started buffer except its wait.
      for (size_t j = 0; j < nodes.size(); ++j) {
        if (j == i) continue;
        for (ir::ValueId v : nodes[j].inputs) EXPECT_NE(v, n.inputs[0]) << trace(after);
      }
    }
    EXPECT_LE(in_flight, o.max_in_flight) << trace(after);
  }
  // Every collective split once, starts and waits in the traced order.
  std::vector<int> order;
  for (int k = 0; k < collectives; ++k) order.push_back(k);
  EXPECT_EQ(starts, order);
  EXPECT_EQ(waits, order);
  // Nothing else was added or dropped.
  EXPECT_EQ(nodes.size(), before.nodes().size() + size_t(collectives));
}

TEST(CollectiveSchedule, FsdpPrefetchesGathersAndWaitsLate) {
  ir::Graph g = ir_graph(kFsdp);
  ScheduleOptions o{.prefetch = 2, .max_in_flight = 3};
  ir::Graph s = schedule_collectives(g, o);
  check_schedule(g, s, o);
  // Hand-derived from the rules: two gathers ahead of the forward, gather k
  // starting as gather k-2's result is first read; each wait just before
  // its first reader; each reduce_scatter as soon as its input exists, the
  // fourth first retiring the first (at most three in flight).
  EXPECT_EQ(trace(s),
            "S0 S1 W0 S2 matmul tanh W1 S3 matmul tanh W2 matmul tanh W3 matmul tanh "
            "permute matmul S4 permute matmul S5 permute matmul S6 permute matmul W4 S7 "
            "W5 add W6 add W7 add");
}

TEST(CollectiveSchedule, KeepsOrderAndBoundsUnderEveryWindow) {
  for (const char* text : {kFsdp, kChained}) {
    ir::Graph g = ir_graph(text);
    for (ScheduleOptions o : {ScheduleOptions{1, 1}, ScheduleOptions{1, 2}, ScheduleOptions{2, 3},
                              ScheduleOptions{4, 8}}) {
      SCOPED_TRACE(cat("prefetch ", o.prefetch, ", max_in_flight ", o.max_in_flight));
      check_schedule(g, schedule_collectives(g, o), o);
    }
  }
}

TEST(CollectiveSchedule, ChainedCollectivesWaitForTheirInput) {
  ir::Graph s = schedule_collectives(ir_graph(kChained), {.prefetch = 2, .max_in_flight = 4});
  // Each all_reduce waits for the reduce_scatter it reads once that has
  // overlapped a compute node (or its result is needed); the all_to_all
  // reads a graph input but starts only after them.
  EXPECT_EQ(trace(s), "tanh S0 exp W0 S1 S2 W1 W2 S3 W3 S4 add W4");
}

TEST(CollectiveSchedule, IsIdempotentAndLeavesOtherGraphsAlone) {
  ir::Graph s = schedule_collectives(ir_graph(kFsdp));
  EXPECT_EQ(ir::to_text(schedule_collectives(s)), ir::to_text(s));
  const char* plain = R"(
    graph(%0: f32[4]) {
      %1: f32[4] = exp(%0)
      return %1
    })";
  EXPECT_EQ(run_pass([](const ir::Graph& g) { return schedule_collectives(g); }, plain),
            canon(plain));
  EXPECT_THROW(schedule_collectives(s, {.prefetch = 3, .max_in_flight = 2}), kiln::Error);
}

// The wait hands the started buffer on (one arena slot, no copy), and
// neither it nor the start's input is reused while the transfer runs.
TEST(CollectiveSchedule, MemoryPlanAliasesTheWaitAndKeepsBuffersLive) {
  for (bool outputs_in_arena : {true, false}) {
    ir::Graph s = schedule_collectives(ir_graph(kFsdp), {.prefetch = 2, .max_in_flight = 3});
    MemoryPlan plan = plan_memory(s, {}, {.outputs_in_arena = outputs_in_arena});
    const auto& nodes = s.nodes();
    auto overlaps = [&](ir::ValueId a, ir::ValueId b) {
      if (!plan.in_arena(a) || !plan.in_arena(b) || !plan.bytes[a] || !plan.bytes[b]) return false;
      return plan.offsets[a] < plan.offsets[b] + plan.bytes[b] &&
             plan.offsets[b] < plan.offsets[a] + plan.bytes[a];
    };
    for (size_t w = 0; w < nodes.size(); ++w) {
      if (!is_wait(nodes[w])) continue;
      ir::ValueId started = nodes[w].inputs[0], sent = nodes[w].inputs[1];
      ir::ValueId result = nodes[w].outputs[0];
      EXPECT_EQ(plan.offsets[result], plan.offsets[started]);
      size_t st = size_t(s.values()[started].node);
      for (size_t j = st + 1; j < w; ++j)
        for (ir::ValueId v : nodes[j].outputs) {
          EXPECT_FALSE(overlaps(v, started)) << "node " << j << " reuses a started buffer";
          EXPECT_FALSE(overlaps(v, sent)) << "node " << j << " reuses a buffer being sent";
        }
      // The result lives on after the wait until its last reader.
      for (size_t j = w + 1; j < nodes.size(); ++j) {
        bool read_later = false;
        for (size_t k = j + 1; k < nodes.size(); ++k)
          read_later = read_later || std::count(nodes[k].inputs.begin(), nodes[k].inputs.end(), result);
        if (!read_later) break;
        for (ir::ValueId v : nodes[j].outputs) EXPECT_FALSE(overlaps(v, result)) << "node " << j;
      }
    }
  }
}

TEST(CollectiveSchedule, RunsLastInThePipelineAndCanBeSwitchedOff) {
  ir::Graph g = ir_graph(kFsdp);
  ir::Graph on = optimize(g, {});
  ir::Graph off = optimize(g, {.overlap_collectives = false});
  EXPECT_EQ(count_op(on, "collective_wait"), 8);
  EXPECT_EQ(count_op(on, "all_gather_start"), 4);
  EXPECT_EQ(count_op(off, "collective_wait"), 0);
  EXPECT_EQ(count_op(off, "all_gather"), 4);
  // Optimizing a scheduled program again changes nothing (starts and waits
  // are side effects: never merged, dropped or fused).
  EXPECT_EQ(ir::to_text(optimize(on, {})), ir::to_text(on));
}

}  // namespace
}  // namespace kiln::compiler::test
