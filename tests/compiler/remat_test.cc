// The activation-memory policy: full and selective recomputation and
// offload give the bits of keeping everything, eagerly and compiled, while
// the backward no longer reads the forward's internals (full), only the
// matmul outputs (selective) or only copies it reloads from the offload
// pool (offload), and the measured peak of device memory falls.
#include "kiln/compiler/remat.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>

#include "kiln/autograd/grad.h"
#include "kiln/autograd/scan.h"
#include "kiln/backend/cpu/late_transfers.h"
#include "kiln/compiler/memory_plan.h"
#include "kiln/compiler/offload.h"
#include "kiln/compiler/pipeline.h"
#include "kiln/ir/region.h"
#include "kiln/ops/attention.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/indexing.h"
#include "kiln/ops/matmul.h"
#include "kiln/ops/offload.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/views.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/compile.h"
#include "kiln/runtime/context.h"
#include "kiln/runtime/executable.h"
#include "kiln/runtime/recording.h"
#include "kiln/runtime/region.h"
#include "kiln/runtime/transfer.h"
#include "tests/support/gradcheck.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

using compiler::RematPolicy;
using test::random_tensor;

constexpr int kLayers = 4;

// A residual MLP stack, one region per layer: several large intermediates
// per layer, which is what recomputation saves.
std::vector<Tensor> stack_loss(const std::vector<Tensor>& a) {
  Tensor x = a[0];
  for (int l = 0; l < kLayers; ++l) {
    RegionGuard region("layers." + std::to_string(l));
    Tensor h = matmul(x, a[size_t(l) + 1], false, true);
    Tensor g = silu(h) * tanh(h) + exp(h * 0.01);
    x = x + matmul(g, a[size_t(l) + 1]) * 0.1;
  }
  return {sum(square(x))};
}

std::vector<Tensor> stack_args(int64_t rows, int64_t dim) {
  std::vector<Tensor> a{random_tensor({rows, dim}, DType::f32, 1)};
  for (int l = 0; l < kLayers; ++l)
    a.push_back(random_tensor({dim, dim}, DType::f32, 10 + l) * (1.0 / double(dim)));
  return a;
}

ValueAndGrad run(RematPolicy p, const std::vector<Tensor>& args) {
  GradOptions o;
  o.remat = p;
  return value_and_grad(stack_loss, o)(args);
}

void expect_same(const ValueAndGrad& a, const ValueAndGrad& b, const char* what) {
  EXPECT_EQ(a.values[0].item<float>(), b.values[0].item<float>()) << what;
  for (size_t i = 0; i < a.grads.size(); ++i)
    EXPECT_EQ(a.grads[i].to_vector<float>(), b.grads[i].to_vector<float>()) << what << " grad " << i;
}

ir::Graph traced(RematPolicy p) {
  return compiler::rematerialize(test::trace_loss_and_grads(stack_loss, stack_args(8, 16))->graph, p);
}

// The forward values of region `name` that its backward reads.
std::vector<const ir::OpDef*> saved_producers(const ir::Graph& g, int layer) {
  std::string fwd = "layers." + std::to_string(layer), bwd = ir::backward_region(fwd);
  std::vector<const ir::OpDef*> out;
  for (const ir::Node& n : g.nodes()) {
    if (n.region < 0 || g.region_name(n.region) != bwd) continue;
    for (ir::ValueId v : n.inputs) {
      int32_t p = g.values()[size_t(v)].node;
      if (p >= 0 && g.nodes()[size_t(p)].region >= 0 &&
          g.region_name(g.nodes()[size_t(p)].region) == fwd)
        out.push_back(g.nodes()[size_t(p)].op);
    }
  }
  return out;
}

TEST(Remat, SameBitsEagerly) {
  auto args = stack_args(16, 32);
  ValueAndGrad none = run(RematPolicy::none, args);
  expect_same(none, run(RematPolicy::full, args), "full");
  expect_same(none, run(RematPolicy::selective, args), "selective");
  expect_same(none, run(RematPolicy::offload, args), "offload");
}

TEST(Remat, SameBitsCompiled) {
  auto args = stack_args(16, 32);
  ValueAndGrad none = run(RematPolicy::none, args);
  for (RematPolicy p : {RematPolicy::full, RematPolicy::selective, RematPolicy::offload}) {
    CompiledFunction f = compile([p](const std::vector<Tensor>& a) {
      ValueAndGrad r = run(p, a);
      std::vector<Tensor> out{r.values[0]};
      out.insert(out.end(), r.grads.begin(), r.grads.end());
      return out;
    });
    std::vector<Tensor> out = f(args);
    EXPECT_EQ(out[0].item<float>(), none.values[0].item<float>()) << remat_policy_name(p);
    for (size_t i = 0; i < args.size(); ++i)
      EXPECT_EQ(out[i + 1].to_vector<float>(), none.grads[i].to_vector<float>())
          << remat_policy_name(p) << " grad " << i;
  }
}

TEST(Remat, WhatTheBackwardReads) {
  ir::Graph none = traced(RematPolicy::none), full = traced(RematPolicy::full),
            selective = traced(RematPolicy::selective);
  for (int l = 0; l < kLayers; ++l) {
    EXPECT_FALSE(saved_producers(none, l).empty()) << l;
    EXPECT_TRUE(saved_producers(full, l).empty()) << l;
    for (const ir::OpDef* op : saved_producers(selective, l))
      EXPECT_TRUE(compiler::saved_by_selective(*op)) << op->name << " saved in layer " << l;
  }
  ir::verify(full);
  ir::verify(selective);
}

TEST(Remat, KeptActivationBytes) {
  auto kept = [](RematPolicy p) { return compiler::kept_activation_bytes(traced(p)).value(); };
  const int64_t none = kept(RematPolicy::none), selective = kept(RematPolicy::selective),
                full = kept(RematPolicy::full);
  EXPECT_GT(none, selective);
  EXPECT_GT(selective, full);
  // Full keeps each layer's input x (f32 [8, 16]), made by the layer before;
  // layer 0's is a graph input, made in no region.
  EXPECT_EQ(full, (kLayers - 1) * 8 * 16 * 4);
  // A graph without regions has nothing to count.
  auto plain = test::trace_loss_and_grads(
      [](const std::vector<Tensor>& a) { return std::vector<Tensor>{sum(square(a[0]))}; },
      stack_args(8, 16));
  EXPECT_FALSE(compiler::kept_activation_bytes(plain->graph).has_value());
}

int count_op(const ir::Graph& g, const std::string& name) {
  int n = 0;
  for (const ir::Node& node : g.nodes()) n += node.op->name == name;
  return n;
}

TEST(Remat, RecomputationSurvivesCse) {
  compiler::PassOptions no_fusion;  // fusion would hide the tanh nodes inside fused kernels
  no_fusion.fuse = false;
  ir::Graph none = compiler::optimize(traced(RematPolicy::none), no_fusion);
  ir::Graph full = compiler::optimize(traced(RematPolicy::full), no_fusion);
  EXPECT_EQ(count_op(none, "tanh"), kLayers);
  EXPECT_EQ(count_op(full, "tanh"), 2 * kLayers) << "each layer's tanh is computed again";
}

TEST(Remat, LowersPeakMemory) {
  auto args = stack_args(1024, 256);  // 1 MiB per activation
  // Debug mode runs each op before the next is issued: the peak is exact.
  EagerModeGuard synchronous(EagerMode::debug);
  auto peak = [&](RematPolicy p) {
    synchronize();
    reset_peak_memory(kCPU);
    int64_t before = memory_stats(kCPU).allocated;
    ValueAndGrad r = run(p, args);
    r.values[0].item<float>();
    return memory_stats(kCPU).peak_allocated - before;
  };
  int64_t none = peak(RematPolicy::none), selective = peak(RematPolicy::selective),
          full = peak(RematPolicy::full);
  EXPECT_LT(full, none);
  EXPECT_LT(selective, none);
  std::cout << "peak MiB: none " << none / 1048576.0 << ", selective " << selective / 1048576.0
            << ", full " << full / 1048576.0 << "\n";
}

// Offload moves exactly what none keeps: every value a backward region
// read from a forward region goes out once, after its last forward use,
// and comes back at the start of the backward of the layer after its own
// (one block early), or of its own for the last layer. Each move is a
// transfer waited for later in its own region run: an offload by the end
// of the forward run, a reload by the end of its run or its first reader.
TEST(Offload, MovesWhatNoneKeeps) {
  ir::Graph none = traced(RematPolicy::none), off = traced(RematPolicy::offload);
  ir::verify(off);
  EXPECT_EQ(compiler::offloaded_activation_bytes(off), compiler::kept_activation_bytes(none).value());
  EXPECT_EQ(compiler::kept_activation_bytes(off).value(), 0);
  EXPECT_GT(count_op(off, "offload_start"), 0);
  EXPECT_EQ(count_op(off, "offload_start"), count_op(off, "reload_start"));
  EXPECT_EQ(count_op(off, "transfer_wait"), 2 * count_op(off, "reload_start"));
  const auto& nodes = off.nodes();
  auto region_of = [&](size_t i) { return nodes[i].region < 0 ? std::string() : off.region_name(nodes[i].region); };
  auto made_by = [&](ir::ValueId v) { return size_t(off.values()[size_t(v)].node); };
  std::vector<std::vector<size_t>> readers(off.values().size());
  for (size_t i = 0; i < nodes.size(); ++i)
    for (ir::ValueId v : nodes[i].inputs) readers[size_t(v)].push_back(i);
  auto transfer = [&](size_t i) { return nodes[i].op->name.find("_start") != std::string::npos ||
                                         nodes[i].op->name == "transfer_wait"; };
  // Node i is the last of its region run but for transfers.
  auto ends_run = [&](size_t i) {
    size_t j = i + 1;
    while (j < nodes.size() && transfer(j) && region_of(j) == region_of(i)) ++j;
    return j == nodes.size() || region_of(j) != region_of(i);
  };
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].op->name != "reload_start") continue;
    // It reads the offload's wait, which ends the offload's region run and
    // keeps the device copy live until then.
    const size_t offloaded = made_by(nodes[i].inputs[0]);
    ASSERT_EQ(nodes[offloaded].op->name, "transfer_wait");
    EXPECT_TRUE(nodes[offloaded].attrs.b("offloaded"));
    const size_t started = made_by(nodes[offloaded].inputs[0]);
    ASSERT_EQ(nodes[started].op->name, "offload_start");
    EXPECT_EQ(nodes[offloaded].inputs[1], nodes[started].inputs[0]);
    EXPECT_FALSE(ir::is_backward_region(region_of(started))) << region_of(started);
    EXPECT_EQ(region_of(offloaded), region_of(started));
    EXPECT_TRUE(ends_run(offloaded)) << "an offload is waited for at the end of its run";
    for (size_t j : readers[size_t(nodes[started].inputs[0])])
      EXPECT_TRUE(j <= started || j == offloaded) << "the offload follows the last forward use";
    // Its only reader is its wait, in its run: at the run's end or just
    // before the value's first reader.
    ASSERT_EQ(readers[size_t(nodes[i].outputs[0])].size(), 1u);
    const size_t reloaded = readers[size_t(nodes[i].outputs[0])][0];
    ASSERT_EQ(nodes[reloaded].op->name, "transfer_wait");
    EXPECT_FALSE(nodes[reloaded].attrs.b("offloaded"));
    EXPECT_EQ(nodes[reloaded].inputs[1], nodes[i].inputs[0]) << "the host copy stays live";
    EXPECT_EQ(region_of(reloaded), region_of(i));
    const std::vector<size_t>& uses = readers[size_t(nodes[reloaded].outputs[0])];
    ASSERT_FALSE(uses.empty());
    EXPECT_TRUE(ends_run(reloaded) || uses[0] == reloaded + 1) << "node " << reloaded;
    // The backward of layer k reads it first; it comes back at the start of
    // layer k+1's backward (layer k's own for the last layer).
    const std::string reader = region_of(uses[0]);
    ASSERT_TRUE(ir::is_backward_region(reader)) << reader;
    const int k = std::stoi(reader.substr(reader.find('.') + 1));
    EXPECT_EQ(region_of(i), ir::backward_region("layers." + std::to_string(std::min(k + 1, kLayers - 1))));
    EXPECT_TRUE(i == 0 || region_of(i - 1) != region_of(i) || transfer(i - 1))
        << "a reload starts its region's run";
  }
}

// Transfers that complete as late as their waits allow (a copy stream far
// slower than the compute) give the same bits: nothing reads a move's
// destination before its wait, nor changes its source before then.
TEST(Offload, SameBitsWhenTransfersEndAtTheirWaits) {
  auto args = stack_args(24, 32);  // not another test's: the pools keep old values
  ValueAndGrad none = run(RematPolicy::none, args);
  cpu::set_late_transfers(true);
  expect_same(none, run(RematPolicy::offload, args), "offload, eager");
  CompiledFunction f = compile([](const std::vector<Tensor>& a) {
    ValueAndGrad r = run(RematPolicy::offload, a);
    std::vector<Tensor> out{r.values[0]};
    out.insert(out.end(), r.grads.begin(), r.grads.end());
    return out;
  });
  std::vector<Tensor> got = f(args);
  cpu::set_late_transfers(false);
  EXPECT_EQ(got[0].item<float>(), none.values[0].item<float>());
  for (size_t i = 0; i < none.grads.size(); ++i)
    EXPECT_EQ(got[i + 1].to_vector<float>(), none.grads[i].to_vector<float>()) << "grad " << i;
}

// Attention is differentiated through its composite, whose backward first
// recomputes the probabilities from q and k. Kept on the device (none), CSE
// merges that with the lowered forward; offload hoists it into the forward
// so that it still does, instead of recomputing from reloaded copies.
TEST(Offload, AttentionIsNotComputedAgain) {
  auto attention_stack = [](const std::vector<Tensor>& a) {
    Tensor x = a[0] * 1.0;
    for (int l = 0; l < 2; ++l) {
      RegionGuard region("layers." + std::to_string(l));
      AttentionOptions o;
      o.causal = true;
      x = x + scaled_dot_product_attention(x * 0.5, x * 0.25, x * 2.0, o);
    }
    return std::vector<Tensor>{sum(square(x))};
  };
  std::vector<Tensor> args{random_tensor({1, 2, 8, 16}, DType::f32, 4)};
  compiler::PassOptions no_fusion;  // fusion would hide the softmax nodes
  no_fusion.fuse = false;
  auto softmaxes = [&](RematPolicy p) {
    ir::Graph g = compiler::rematerialize(test::trace_loss_and_grads(attention_stack, args)->graph, p);
    return count_op(compiler::optimize(prepare_for_device(g, kCPU), no_fusion), "softmax");
  };
  EXPECT_EQ(softmaxes(RematPolicy::none), 2);
  EXPECT_EQ(softmaxes(RematPolicy::offload), 2);
  ValueAndGrad none, off;
  for (auto [p, out] : {std::pair{RematPolicy::none, &none}, {RematPolicy::offload, &off}}) {
    GradOptions o;
    o.remat = p;
    *out = value_and_grad(attention_stack, o)(args);
  }
  expect_same(none, off, "attention, offload");
}

// Under scan the saved activations are the scan's per-iteration carries,
// one stacked output: offload puts exactly that output in the offload pool,
// eagerly and compiled, with the bits of none.
TEST(Offload, UnderScanTheSavedCarriesAreOffloaded) {
  auto scan_loss = [](const std::vector<Tensor>& a) {
    ScanResult r = scan(
        [](const std::vector<Tensor>& x) {
          return std::vector<Tensor>{x[0] + tanh(matmul(x[0], x[1]))};
        },
        {a[0]}, {a[1]}, {});
    return std::vector<Tensor>{sum(square(r.carries[0]))};
  };
  std::vector<Tensor> args{random_tensor({4, 8}, DType::f32, 1), random_tensor({5, 8, 8}, DType::f32, 2) * 0.3};
  ir::Graph off =
      compiler::rematerialize(test::trace_loss_and_grads(scan_loss, args)->graph, RematPolicy::offload);
  EXPECT_EQ(compiler::offloaded_activation_bytes(off), 5 * 4 * 8 * 4) << "the 5 saved [4, 8] carries";
  EXPECT_EQ(compiler::plan_memory(off, {}).offload_peak_bytes, 5 * 4 * 8 * 4);
  ValueAndGrad none, offloaded;
  for (auto [p, out] : {std::pair{RematPolicy::none, &none}, {RematPolicy::offload, &offloaded}}) {
    GradOptions o;
    o.remat = p;
    *out = value_and_grad(scan_loss, o)(args);
  }
  expect_same(none, offloaded, "scan, offload");
  CompiledFunction compiled = compile([&](const std::vector<Tensor>& a) {
    GradOptions o;
    o.remat = RematPolicy::offload;
    ValueAndGrad r = value_and_grad(scan_loss, o)(a);
    return std::vector<Tensor>{r.values[0], r.grads[0], r.grads[1]};
  });
  std::vector<Tensor> got = compiled(args);
  EXPECT_EQ(got[0].item<float>(), none.values[0].item<float>());
  EXPECT_EQ(got[2].to_vector<float>(), none.grads[1].to_vector<float>());
  EXPECT_EQ(compiled.last_executable().stats().offload_bytes, 5 * 4 * 8 * 4);
  // The backward's scan reads the carries from the offload pool, one
  // iteration ahead; with transfers ending at their waits, the same bits.
  int reading = 0;
  for (const ir::Node& n : off.nodes())
    if (n.op->name == "scan" && !n.attrs.ints("offloaded_stacked").empty()) {
      EXPECT_EQ(n.attrs.ints("offloaded_stacked"), ir::IntList{0});
      ++reading;
    }
  EXPECT_EQ(reading, 1);
  // New inputs: the offload pool's blocks still hold the last run's values.
  const std::vector<Tensor> other{random_tensor({4, 8}, DType::f32, 3),
                                  random_tensor({5, 8, 8}, DType::f32, 4) * 0.3};
  const ValueAndGrad want = value_and_grad(scan_loss)(other);
  cpu::set_late_transfers(true);
  GradOptions late;
  late.remat = RematPolicy::offload;
  offloaded = value_and_grad(scan_loss, late)(other);
  got = compiled(other);
  cpu::set_late_transfers(false);
  expect_same(want, offloaded, "scan, offload, late transfers");
  EXPECT_EQ(got[2].to_vector<float>(), want.grads[1].to_vector<float>());
}

TEST(Offload, MemoryPlanKeepsOffloadedValuesInTheirOwnArena) {
  auto plan = [](RematPolicy p) {
    ir::Graph g = compiler::optimize(traced(p), {});
    return compiler::plan_memory(g, {});
  };
  compiler::MemoryPlan none = plan(RematPolicy::none), off = plan(RematPolicy::offload);
  EXPECT_EQ(none.offload_peak_bytes, 0);
  EXPECT_GT(off.offload_peak_bytes, 0);
  EXPECT_LT(off.peak_bytes, none.peak_bytes);
  std::cout << "arena bytes: none " << none.peak_bytes << ", offload " << off.peak_bytes
            << " + offload arena " << off.offload_peak_bytes << "\n";
}

// Measured: the offload pool holds every layer's saved activations, and the
// device pool's peak falls by at least 40% of that: with four layers the
// backward holds about two of them on the device at a time (its own and
// the one reloaded early), so half at best.
TEST(Offload, LowersDevicePeakEagerlyAndCompiled) {
  auto args = stack_args(1024, 256);  // 1 MiB per activation
  const int64_t offloaded = compiler::offloaded_activation_bytes(
      compiler::rematerialize(test::trace_loss_and_grads(stack_loss, args)->graph, RematPolicy::offload));
  struct Peaks {
    int64_t device = 0, offload = 0;
  };
  auto measure = [&](auto&& step) {
    synchronize();
    reset_peak_memory(kCPU);
    reset_peak_memory(kCPU, Pool::offload);
    const int64_t before = memory_stats(kCPU).allocated;
    const int64_t before_offload = memory_stats(kCPU, Pool::offload).allocated;
    step();
    synchronize();
    return Peaks{memory_stats(kCPU).peak_allocated - before,
                 memory_stats(kCPU, Pool::offload).peak_allocated - before_offload};
  };
  auto grads = [](RematPolicy p) {
    return [p](const std::vector<Tensor>& a) {
      ValueAndGrad r = run(p, a);
      std::vector<Tensor> out{r.values[0]};
      out.insert(out.end(), r.grads.begin(), r.grads.end());
      return out;
    };
  };
  for (bool compiled : {false, true}) {
    std::map<RematPolicy, Peaks> peaks;
    for (RematPolicy p : {RematPolicy::none, RematPolicy::offload}) {
      // Debug mode runs each op before the next is issued: the eager peak is exact.
      EagerModeGuard synchronous(EagerMode::debug);
      CompiledFunction f = compile(grads(p));
      if (compiled) f(args);  // compiles; the measured run is the second
      peaks[p] = measure([&] { compiled ? f(args) : grads(p)(args); });
    }
    const Peaks none = peaks[RematPolicy::none], off = peaks[RematPolicy::offload];
    EXPECT_EQ(none.offload, 0) << compiled;
    // Compiled, the optimizer drops the reloads of values no longer read
    // (and their offloads): at most what the traced graph offloads.
    if (compiled) EXPECT_GT(off.offload, offloaded / 2);
    else EXPECT_GE(off.offload, offloaded);
    EXPECT_GE(10 * (none.device - off.device), 4 * off.offload) << compiled;
    std::cout << (compiled ? "compiled" : "eager") << ": device peak MiB none "
              << none.device / 1048576.0 << ", offload " << off.device / 1048576.0
              << " (+ " << off.offload / 1048576.0 << " in the offload pool; "
              << offloaded / 1048576.0 << " offloaded in the traced graph)\n";
  }
}

// value_and_grad of the stack of stack_loss's shape with `extra(h, last)`
// added to layer 2's output, on `args` and `last`.
ValueAndGrad step_with_layer_2(const std::function<Tensor(const Tensor&, const Tensor&)>& extra,
                               RematPolicy p, const std::vector<Tensor>& args, const Tensor& last) {
  auto loss = [&](const std::vector<Tensor>& a) {
    Tensor x = a[0];
    for (int l = 0; l < kLayers; ++l) {
      RegionGuard region("layers." + std::to_string(l));
      Tensor h = matmul(x, a[size_t(l) + 1], false, true);
      x = x + matmul(silu(h) * tanh(h), a[size_t(l) + 1]) * 0.1;
      if (l == 2) x = x + extra(h, a.back());
    }
    return std::vector<Tensor>{sum(square(x))};
  };
  std::vector<Tensor> a = args;
  a.push_back(last);
  GradOptions o;
  o.remat = p;
  return value_and_grad(loss, o)(a);
}

// The transfers in flight on cpu:0's queue thread.
size_t cpu_transfers_in_flight() {
  size_t n = 0;
  backend(kCPU).queue(0).enqueue([&] { n = transfers_in_flight(); }, "counting transfers");
  synchronize(kCPU);
  return n;
}

// A step abandoned between a reload's start and its wait (debug mode finds
// the infinite gradient of sqrt at 0 in layer 2's backward, while layer 1's
// activations are coming back) leaves no transfer in flight, and the next
// step, which moves the same buffers, gives the bits of keeping everything.
TEST(Offload, AnAbandonedStepLeavesNoTransferInFlight) {
  auto root = [](const Tensor& h, const Tensor& scale) { return sqrt(square(h) * scale); };
  const std::vector<Tensor> args = stack_args(16, 32);
  auto step = [&](RematPolicy p, double scale) {
    return step_with_layer_2(root, p, args, full({16, 32}, scale, DType::f32));
  };
  {
    EagerModeGuard debug(EagerMode::debug);
    test::expect_error([&] { step(RematPolicy::offload, 0.0); }, "debug mode: ");
  }
  EXPECT_EQ(cpu_transfers_in_flight(), 0u);
  expect_same(step(RematPolicy::none, 1.0), step(RematPolicy::offload, 1.0), "the next step");
}

// The same when the step fails on the device's queue (a bad index, in
// layer 2's forward after its offloads started): the queue ends the work
// the dropped tasks would have waited for.
TEST(Offload, AStepFailedOnTheQueueLeavesNoTransferInFlight) {
  auto lookup = [](const Tensor& h, const Tensor& ids) { return sum(embedding(h, ids)); };
  test::expect_error(
      [&] {
        step_with_layer_2(lookup, RematPolicy::offload, stack_args(16, 32),
                          from_vector(std::vector<int64_t>{1000}, {1}))
            .values[0]
            .item<float>();
      },
      "out of range");
  EXPECT_EQ(cpu_transfers_in_flight(), 0u);
}

TEST(Offload, OpsAreTheIdentityWithTheIdentityGradient) {
  Tensor x = random_tensor({3, 4}, DType::f64, 6);
  synchronize();
  const int64_t before = memory_stats(kCPU, Pool::offload).allocated;
  Tensor host = offload(x);
  synchronize();
  EXPECT_GE(memory_stats(kCPU, Pool::offload).allocated - before, 3 * 4 * 8);
  EXPECT_EQ(reload(host).to_vector<double>(), x.to_vector<double>());
  host = Tensor();
  synchronize();
  EXPECT_EQ(memory_stats(kCPU, Pool::offload).allocated, before);
  EXPECT_TRUE(test::check_gradients([](const std::vector<Tensor>& a) { return reload(offload(a[0])); },
                                    {x}));
}

TEST(OptimizationBarrier, IsTheIdentityWithTheIdentityGradient) {
  Tensor x = random_tensor({3, 4}, DType::f64, 5);
  EXPECT_EQ(optimization_barrier(x).to_vector<double>(), x.to_vector<double>());
  EXPECT_TRUE(test::check_gradients(
      [](const std::vector<Tensor>& a) { return optimization_barrier(a[0]); }, {x}));
}

}  // namespace
}  // namespace kiln
