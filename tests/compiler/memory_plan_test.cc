#include "kiln/compiler/memory_plan.h"

#include "kiln/base/error.h"
#include "kiln/compiler/pipeline.h"
#include "tests/compiler/pass_test_util.h"
#include "tests/compiler/random_graphs.h"

namespace kiln::compiler::test {
namespace {

// A chain of `n` elementwise ops over f32[1024] (4096 bytes each).
std::string chain(int n) {
  std::string s = "graph(%0: f32[1024]) {\n";
  for (int i = 1; i <= n; ++i) s += cat("  %", i, ": f32[1024] = ", i % 2 ? "exp" : "neg", "(%", i - 1, ")\n");
  return s + cat("  return %", n, "\n}\n");
}

// Checks the plan's invariants against liveness computed here: offsets are
// aligned, inside their arena, and values of one arena alive at the same
// node are disjoint.
void check_plan(const ir::Graph& g, const MemoryPlan& plan) {
  const auto& nodes = g.nodes();
  int n = int(nodes.size());
  std::vector<int> def(g.values().size(), -1), last(g.values().size(), -1);
  for (int i = 0; i < n; ++i) {
    for (ir::ValueId v : nodes[i].outputs) def[v] = last[v] = i;
    for (ir::ValueId v : nodes[i].inputs) last[v] = std::max(last[v], i);
  }
  for (ir::ValueId v : g.outputs()) last[v] = n;
  // A wait's or reshape's result may share its first input's slot.
  std::vector<ir::ValueId> root(g.values().size());
  for (size_t v = 0; v < root.size(); ++v) root[v] = ir::ValueId(v);
  for (const ir::Node& node : nodes)
    if (node.op->aliases_first_input || node.op->reinterprets_first_input)
      root[node.outputs[0]] = root[node.inputs[0]];
  std::vector<ir::ValueId> arena;
  for (size_t v = 0; v < g.values().size(); ++v) {
    if (!plan.in_arena(ir::ValueId(v))) continue;
    EXPECT_GE(def[v], 0) << "graph input %" << v << " is in the arena";
    EXPECT_EQ(plan.offsets[v] % MemoryPlan::kAlignment, 0) << "%" << v;
    EXPECT_LE(plan.offsets[v] + plan.bytes[v],
              plan.offloaded[v] ? plan.offload_peak_bytes : plan.peak_bytes) << "%" << v;
    arena.push_back(ir::ValueId(v));
  }
  for (ir::ValueId a : arena)
    for (ir::ValueId b : arena) {
      if (a >= b || plan.bytes[a] == 0 || plan.bytes[b] == 0) continue;
      if (plan.offloaded[a] != plan.offloaded[b] || root[a] == root[b]) continue;
      bool live_together = def[a] <= last[b] && def[b] <= last[a];
      bool overlap = plan.offsets[a] < plan.offsets[b] + plan.bytes[b] &&
                     plan.offsets[b] < plan.offsets[a] + plan.bytes[a];
      EXPECT_FALSE(live_together && overlap) << "%" << a << " and %" << b << " overlap";
    }
}

TEST(MemoryPlan, AChainReusesTwoBuffers) {
  ir::Graph g = ir_graph(chain(8));
  MemoryPlan plan = plan_memory(g, {});
  check_plan(g, plan);
  EXPECT_EQ(plan.naive_bytes, 8 * 4096);
  EXPECT_EQ(plan.peak_bytes, 2 * 4096);
  EXPECT_FALSE(plan.in_arena(0));
  EXPECT_TRUE(plan.donated.empty());
}

// A kernel's scratch lives beside its node's input and output, for that
// node alone; it leaves the layout of the values as it was.
TEST(MemoryPlan, NodeScratchLivesForItsNodeAlone) {
  ir::Graph g = ir_graph(chain(8));
  PlanOptions options;
  options.node_scratch.assign(8, 0);
  options.node_scratch[3] = 3 * 4096 - 10;  // aligned up
  MemoryPlan plan = plan_memory(g, {}, options);
  check_plan(g, plan);
  EXPECT_EQ(plan.peak_bytes, 5 * 4096);
  EXPECT_EQ(plan.naive_bytes, 8 * 4096);
  options.node_scratch.assign(7, 0);
  EXPECT_THROW(plan_memory(g, {}, options), Error);
}

// Without an arena (eager mode), each value has a buffer of its own: the
// live peak is the most bytes live at once, below an arena that a hole too
// small for the next value made grow, and counted in the allocator's sizes.
TEST(MemoryPlan, TheLivePeakIsTheMostBytesLiveAtOnce) {
  ir::Graph g = ir_graph(R"(
    graph(%0: f32[256], %1: f32[512], %2: f32[384]) {
      %3: f32[256] = exp(%0)
      %4: f32[512] = exp(%1)
      %5: f32[256] = neg(%3)
      %6: f32[384] = exp(%2)
      return %4, %5, %6
    }
  )");
  MemoryPlan plan = plan_memory(g, {});
  check_plan(g, plan);
  EXPECT_EQ(plan.peak_bytes, 1024 + 2048 + 1024 + 1536) << "%6 does not fit where %3 was";
  EXPECT_EQ(plan.live_peak_bytes, 2048 + 1024 + 1536);
  PlanOptions options;
  options.buffer_bytes = [](int64_t bytes) { return (bytes + 4095) / 4096 * 4096; };
  options.node_scratch = {0, 0, 0, 100};  // beside %6, counted as given (kernels give blocks)
  plan = plan_memory(g, {}, options);
  EXPECT_EQ(plan.live_peak_bytes, 3 * 4096 + 100);
  EXPECT_EQ(plan.offload_live_peak_bytes, 0);
}

// An offloaded value lives in the offload arena from its offload to its
// reload; the device arena holds neither it nor the space it would take.
TEST(MemoryPlan, OffloadedValuesHaveAnArenaOfTheirOwn) {
  ir::Graph g = ir_graph(R"(
    graph(%0: f32[1024]) {
      %1: f32[1024] = exp(%0)
      %2: f32[1024] = offload(%1)
      %3: f32[1024] = neg(%0)
      %4: f32[1024] = exp(%3)
      %5: f32[1024] = reload(%2)
      %6: f32[1024] = add(%4, %5)
      return %6
    }
  )");
  MemoryPlan plan = plan_memory(g, {});
  check_plan(g, plan);
  EXPECT_TRUE(plan.offloaded[2]);
  for (ir::ValueId v : {1, 3, 4, 5, 6}) EXPECT_FALSE(plan.offloaded[v]) << "%" << v;
  EXPECT_EQ(plan.offload_peak_bytes, 4096);
  EXPECT_EQ(plan.offload_live_peak_bytes, 4096);
  // %1 dies at its offload, so %3 and %4 reuse its space: two buffers at a time.
  EXPECT_EQ(plan.peak_bytes, 3 * 4096);
  EXPECT_EQ(plan.live_peak_bytes, 3 * 4096);
  EXPECT_EQ(plan.naive_bytes, 5 * 4096);
}

// A transfer's wait yields the transfer's destination in the same slot,
// and keeps the source (its second input) live until it.
TEST(MemoryPlan, ATransferWaitSharesItsTransfersSlot) {
  ir::Graph g = ir_graph(R"(
    graph(%0: f32[1024]) {
      %1: f32[1024] = exp(%0)
      %2: f32[1024] = offload_start(%1)
      %3: f32[1024] = neg(%0)
      %4: f32[1024] = transfer_wait(%2, %1) {offloaded=true}
      %5: f32[1024] = exp(%3)
      %6: f32[1024] = reload_start(%4)
      %7: f32[1024] = transfer_wait(%6, %4)
      %8: f32[1024] = add(%5, %7)
      return %8
    }
  )");
  MemoryPlan plan = plan_memory(g, {});
  check_plan(g, plan);
  EXPECT_TRUE(plan.offloaded[2] && plan.offloaded[4]);
  EXPECT_EQ(plan.offsets[4], plan.offsets[2]);
  EXPECT_FALSE(plan.offloaded[6] || plan.offloaded[7]);
  EXPECT_EQ(plan.offsets[7], plan.offsets[6]);
  EXPECT_EQ(plan.offload_peak_bytes, 4096);
  EXPECT_NE(plan.offsets[3], plan.offsets[1]) << "%1 is live until its wait";
  // %5 reuses %1's space; then %5, the reloaded value and the sum.
  EXPECT_EQ(plan.peak_bytes, 3 * 4096);
}

// A reshape's result is its input's bytes: one slot, live until the last
// read of either, and no buffer of its own.
TEST(MemoryPlan, AReshapeSharesItsInputsSlot) {
  ir::Graph g = ir_graph(R"(
    graph(%0: f32[1024]) {
      %1: f32[1024] = exp(%0)
      %2: f32[32,32] = reshape(%1) {shape=[32,32]}
      %3: f32[32,32] = neg(%2)
      %4: f32[1024] = exp(%0)
      %5: f32[1,32,32] = unsqueeze(%2) {axis=0}
      %6: f32[32,32] = add(%3, %2)
      return %6, %5, %4
    }
  )");
  MemoryPlan plan = plan_memory(g, {});
  check_plan(g, plan);
  EXPECT_EQ(plan.offsets[2], plan.offsets[1]);
  EXPECT_EQ(plan.offsets[5], plan.offsets[1]);
  EXPECT_NE(plan.offsets[4], plan.offsets[1]) << "%1 is live until %2's last read";
  EXPECT_NE(plan.offsets[3], plan.offsets[1]);
  EXPECT_EQ(plan.peak_bytes, 4 * 4096);  // %1 (= %2, %5), %3, %4, %6
  EXPECT_EQ(plan.naive_bytes, 4 * 4096);
}

// A reshape of a graph input (not in the arena) gets a buffer of its own; a
// returned reshape placed outside the arena takes its input in its buffer
// when nothing else reads the input.
TEST(MemoryPlan, AReshapeOfAnInputCopiesAndAReturnedOneTakesItsInput) {
  ir::Graph g = ir_graph(R"(
    graph(%0: f32[1024]) {
      %1: f32[32,32] = reshape(%0) {shape=[32,32]}
      %2: f32[32,32] = exp(%1)
      %3: f32[1024] = reshape(%2) {shape=[1024]}
      %4: f32[32,32] = neg(%1)
      %5: f32[1024] = reshape(%4) {shape=[1024]}
      return %3, %5, %4
    }
  )");
  MemoryPlan plan = plan_memory(g, {}, {.outputs_in_arena = false});
  check_plan(g, plan);
  EXPECT_TRUE(plan.in_arena(1));
  EXPECT_EQ(plan.written_in[2], 3);
  EXPECT_FALSE(plan.in_arena(2)) << "written in the output %3";
  EXPECT_EQ(plan.written_in[4], -1) << "%4 is returned itself";
  EXPECT_FALSE(plan.in_arena(5));
}

// A reshape into a donated input's buffer copies there when it runs: its
// input, made earlier, cannot be written there while the donor is read.
TEST(MemoryPlan, AReshapeIntoADonatedBufferCopies) {
  ir::Graph g = ir_graph(R"(
    graph(%0: f32[1024], %1: f32[32,32]) {
      %2: f32[1024] = exp(%0)
      %3: f32[32,32] = exp(%1)
      %4: f32[32,32] = reshape(%2) {shape=[32,32]}
      return %4, %3
    }
  )");
  MemoryPlan plan = plan_memory(g, {{1, 0}}, {.outputs_in_arena = false});
  check_plan(g, plan);
  ASSERT_EQ(plan.donated.size(), 1u);
  EXPECT_EQ(plan.written_in[2], -1);
  EXPECT_TRUE(plan.in_arena(2));
}

// A collective's start writes its result while later nodes run: it goes
// into a donated buffer only when the donor is read for the last time
// before the start.
TEST(MemoryPlan, AWaitIntoADonatedBufferStartsThereOnlyOnceTheDonorIsDead) {
  const std::string start = R"(%3: f32[1024] = all_reduce_start(%2) {mesh_axis="dp", group_size=2})";
  const std::string donor_read = "%4: f32[1024] = neg(%1)";
  // Whether the started value (the wait's first input) is written in the
  // wait's result, the donor's buffer.
  auto started_in_donor = [](const std::string& first, const std::string& second) {
    ir::Graph g = ir_graph(cat(R"(
      graph(%0: f32[1024], %1: f32[1024]) {
        %2: f32[1024] = exp(%0)
        )", first, "\n", second, R"(
        %5: f32[1024] = collective_wait(%3, %2)
        return %5, %4
      }
    )"));
    MemoryPlan plan = plan_memory(g, {{1, 0}}, {.outputs_in_arena = false});
    check_plan(g, plan);
    EXPECT_EQ(plan.donated, (std::vector<std::pair<int, int>>{{1, 0}}));
    const ir::Node& wait = g.nodes().back();
    const ir::ValueId started = wait.inputs[0];
    EXPECT_EQ(plan.in_arena(started), plan.written_in[started] < 0);
    return plan.written_in[started] == wait.outputs[0];
  };
  EXPECT_FALSE(started_in_donor(start, donor_read)) << "the donor is read while the collective runs";
  EXPECT_TRUE(started_in_donor(donor_read, start));
}

TEST(MemoryPlan, OffsetsAreAligned) {
  ir::Graph g = ir_graph(R"(
    graph(%0: f32[3]) {
      %1: f32[3] = exp(%0)
      %2: f64[3] = cast(%1) {dtype=f64}
      %3: f32[3] = neg(%1)
      return %2, %3
    })");
  MemoryPlan plan = plan_memory(g, {});
  check_plan(g, plan);
  EXPECT_EQ(plan.bytes[2], 24);
  EXPECT_EQ(plan.naive_bytes, 3 * 64);
  EXPECT_EQ(plan.peak_bytes, 3 * 64);  // all three live at once
}

TEST(MemoryPlan, DiamondsAndMultipleOutputsDoNotOverlap) {
  ir::Graph g = ir_graph(R"(
    graph(%0: f32[64], %1: f32[64,64]) {
      %2: f32[64] = exp(%0)
      %3: f32[32], %4: f32[32] = split(%2) {sizes=[32,32]}
      %5: f32[32] = neg(%3)
      %6: f32[64,64] = mul(%1, %2)
      %7: f32[64] = sum(%6) {axes=[0]}
      %8: f32[32] = add(%5, %4)
      %9: f32[64,64] = exp(%6)
      %10: f32[64] = max(%9) {axes=[1]}
      %11: f32[64] = add(%10, %7)
      return %11, %8
    })");
  MemoryPlan plan = plan_memory(g, {});
  check_plan(g, plan);
  EXPECT_LT(plan.peak_bytes, plan.naive_bytes);
}

TEST(MemoryPlan, RandomGraphsNeverOverlapLiveValues) {
  for (uint32_t seed = 0; seed < 100; ++seed) {
    ir::Graph g = random_graph(seed);
    for (const ir::Graph& h : {g, optimize(g, {})}) {
      std::vector<std::pair<int, int>> donations{{0, 0}, {1, 1}, {3, 2}};
      MemoryPlan plan = plan_memory(h, donations);
      check_plan(h, plan);
      EXPECT_LE(plan.peak_bytes, plan.naive_bytes);
      check_plan(h, plan_memory(h, donations, {.outputs_in_arena = false}));
    }
  }
}

TEST(MemoryPlan, OutputsCanLiveOutsideTheArena) {
  ir::Graph g = ir_graph(chain(8));
  MemoryPlan plan = plan_memory(g, {}, {.outputs_in_arena = false});
  check_plan(g, plan);
  EXPECT_FALSE(plan.in_arena(g.outputs()[0]));
  EXPECT_EQ(plan.naive_bytes, 7 * 4096);
  EXPECT_EQ(plan.peak_bytes, 2 * 4096);
  EXPECT_THROW(plan.offset_of(g.outputs()[0]), Error);
}

TEST(MemoryPlan, ADonatedInputHoldsAnElementwiseOutputInPlace) {
  // w - lr * g: the update may overwrite w.
  ir::Graph g = ir_graph(R"(
    graph(%0: f32[256], %1: f32[256]) {
      %2: f32[] = full() {shape=[], value=0.1}
      %3: f32[256] = mul(%1, %2)
      %4: f32[256] = sub(%0, %3)
      return %4
    })");
  MemoryPlan plan = plan_memory(g, {{0, 0}});
  check_plan(g, plan);
  EXPECT_EQ(plan.donated, (std::vector<std::pair<int, int>>{{0, 0}}));
  EXPECT_FALSE(plan.in_arena(g.outputs()[0]));
  // The gradient is read for the last time by mul, before sub runs: also fine.
  MemoryPlan other = plan_memory(g, {{1, 0}});
  EXPECT_EQ(other.donated, (std::vector<std::pair<int, int>>{{1, 0}}));
}

TEST(MemoryPlan, DonationsNeedMatchingTypesAndADeadInput) {
  ir::Graph g = ir_graph(R"(
    graph(%0: f32[16], %1: f32[4,4], %2: f64[16], %3: f32[8]) {
      %4: f32[16] = exp(%0)
      %5: f32[4,4] = matmul(%1, %1)
      %6: f32[16] = neg(%4)
      %7: f32[16] = add(%6, %0)
      return %7, %5, %4
    })");
  auto donated = [&](int in, int out) { return !plan_memory(g, {{in, out}}).donated.empty(); };
  EXPECT_FALSE(donated(0, 2));  // %0 is still read by add after exp wrote %4
  EXPECT_TRUE(donated(0, 0));   // add reads %0 last and is element-aligned
  EXPECT_FALSE(donated(1, 1));  // matmul is not element-aligned
  EXPECT_FALSE(donated(2, 0));  // dtype differs
  EXPECT_FALSE(donated(3, 0));  // byte size differs
  EXPECT_TRUE(donated(1, 0));   // 64 bytes, f32, last read before add: reshaping is fine
  EXPECT_THROW(plan_memory(g, {{4, 0}}), Error);
  EXPECT_THROW(plan_memory(g, {{0, 3}}), Error);
  // One input, one output at most.
  MemoryPlan both = plan_memory(g, {{0, 0}, {1, 0}});
  EXPECT_EQ(both.donated, (std::vector<std::pair<int, int>>{{0, 0}}));
  check_plan(g, both);
}

TEST(MemoryPlan, AReturnedInputIsNotDonated) {
  ir::Graph g = ir_graph(R"(
    graph(%0: f32[16]) {
      %1: f32[16] = exp(%0)
      return %1, %0
    })");
  EXPECT_TRUE(plan_memory(g, {{0, 0}}).donated.empty());
  EXPECT_TRUE(plan_memory(g, {{0, 1}}).donated.empty());  // output 1 is the input itself
}

}  // namespace
}  // namespace kiln::compiler::test
