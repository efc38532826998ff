// defer_and_fuse: results equal strict mode, liveness decides outputs,
// side effects keep their order, repeated blocks flush at block boundaries
// (and a traced graph's regions are cut there too), and views keep their
// eager semantics.
#include "kiln/runtime/defer.h"

#include <gtest/gtest.h>

#include <cmath>

#include "kiln/autograd/grad.h"
#include "kiln/ops/declare.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/matmul.h"
#include "kiln/ops/offload.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/rms_norm.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/compile.h"
#include "kiln/runtime/defer_regions.h"
#include "kiln/runtime/graph_runner.h"
#include "kiln/runtime/kernel.h"
#include "kiln/runtime/recording.h"
#include "kiln/runtime/spmd.h"
#include "tests/support/gradcheck.h"

namespace kiln {
namespace {

using test::random_tensor;

// A side-effecting test op whose kernel logs its "tag" attribute.
std::vector<int64_t> g_log;
const ir::OpDef& kLogOp = ops::declare({.name = "test_log",
                                        .attrs = {{"tag", ir::AttrKind::int_, std::nullopt}},
                                        .infer = ops::same_as_first,
                                        .side_effects = true});
const KernelRegistrar log_kernel{DeviceKind::cpu, "test_log", {[](const KernelArgs& a) {
                                   g_log.push_back(a.attrs.i("tag"));
                                 }}};

template <class F>
auto in_mode(EagerMode m, F f) {
  EagerModeGuard guard(m);
  return f();
}

// A small transformer-ish computation touching many op families.
std::vector<double> workload(const Tensor& x, const Tensor& w) {
  Tensor h = silu(matmul(x, w, false, true)) * 0.5 + 1.0;
  Tensor s = softmax(h, -1);
  Tensor n = rms_norm(s, ones({w.dim(0)}), 1e-5);
  Tensor t = n.t().slice(0, 1, 5).contiguous();
  return (sum(t * t, {1}) + mean(n)).to_vector<double>();
}

TEST(Defer, SameResultsAsStrict) {
  Tensor x = random_tensor({6, 8}, DType::f32, 1), w = random_tensor({8, 8}, DType::f32, 2);
  auto strict = in_mode(EagerMode::strict, [&] { return workload(x, w); });
  auto deferred = in_mode(EagerMode::defer_and_fuse, [&] { return workload(x, w); });
  EXPECT_EQ(strict, deferred);
}

TEST(Defer, GradientsMatchStrict) {
  Tensor x = random_tensor({4, 8}, DType::f32, 3), w = random_tensor({8, 8}, DType::f32, 4);
  auto run = [&] {
    auto f = value_and_grad([](const std::vector<Tensor>& a) {
      return std::vector<Tensor>{sum(square(silu(matmul(a[0], a[1], false, true))))};
    });
    ValueAndGrad r = f({x, w});
    return std::vector<std::vector<double>>{r.values[0].to_vector<double>(), r.grads[0].to_vector<double>(),
                                            r.grads[1].to_vector<double>()};
  };
  EXPECT_EQ(in_mode(EagerMode::strict, run), in_mode(EagerMode::defer_and_fuse, run));
}

TEST(Defer, NothingRunsBeforeAMaterializationPoint) {
  EagerModeGuard mode(EagerMode::defer_and_fuse);
  reset_defer_stats();
  Tensor a = ones({4});
  Tensor b = exp(a) + a;
  EXPECT_FALSE(b.impl().materialized());
  EXPECT_EQ(defer_stats().flushes, 0u);
  EXPECT_FLOAT_EQ(b.to_vector<float>()[0], std::exp(1.0f) + 1.0f);
  EXPECT_TRUE(b.impl().materialized());
  EXPECT_EQ(defer_stats().flushes, 1u);
}

TEST(Defer, DroppedValuesAreNotMaterializedHeldOnesAre) {
  EagerModeGuard mode(EagerMode::defer_and_fuse);
  Tensor a = from_vector<float>({1, 2, 3, 4}, {4});  // materialized: not an output
  reset_defer_stats();
  Tensor held = exp(a);
  { Tensor dropped = sin(a) * 3.0; }
  Tensor result = held * 2.0;
  eval({result});
  EXPECT_TRUE(held.impl().materialized());
  EXPECT_TRUE(result.impl().materialized());
  EXPECT_EQ(defer_stats().last_region_outputs, 2u);  // held and result, not the dropped value
}

TEST(Defer, SideEffectsRunInOrderEvenWhenUnused) {
  EagerModeGuard mode(EagerMode::defer_and_fuse);
  g_log.clear();
  Tensor a = ones({2});
  for (int64_t tag : {3, 1, 2}) apply1(kLogOp, {a}, {{"tag", tag}});
  EXPECT_TRUE(g_log.empty());
  eval({});
  synchronize();
  EXPECT_EQ(g_log, (std::vector<int64_t>{3, 1, 2}));
}

TEST(Defer, RepeatedBlocksFlushAtBlockBoundaries) {
  EagerModeGuard mode(EagerMode::defer_and_fuse);
  eval({});
  reset_defer_stats();
  Tensor x = random_tensor({4, 8}, DType::f32, 5), w = random_tensor({8, 8}, DType::f32, 6);
  Tensor expect_x = x;
  auto block = [&](const Tensor& h) {
    Tensor y = h;
    for (int i = 0; i < 6; ++i) y = tanh(matmul(y, w, false, true)) + y * 0.5;
    return y;
  };
  for (int layer = 0; layer < 12; ++layer) x = block(x);
  EXPECT_GT(defer_stats().repeat_flushes, 0u);
  std::vector<float> deferred = x.to_vector<float>();
  EagerModeGuard strict(EagerMode::strict);
  Tensor y = expect_x;
  for (int layer = 0; layer < 12; ++layer) y = block(y);
  EXPECT_EQ(deferred, y.to_vector<float>());
}

// The expected peak memory simulates the cut on the traced graph
// (deferred_regions): it makes the regions a deferred run makes, in number
// and length, once the run has learned its block. Each block reads the
// weight through a view, which runs eagerly and lengthens no region.
TEST(Defer, ATracedGraphIsCutWhereTheRunCutsIt) {
  Tensor w = random_tensor({8, 8}, DType::f32, 6);
  auto fn = [&](const std::vector<Tensor>& in) {
    Tensor y = exp(in[0] * 0.1);
    for (int layer = 0; layer < 12; ++layer)
      for (int i = 0; i < 6; ++i) y = tanh(matmul(y, w.t())) + y * 0.5;
    return std::vector<Tensor>{sum(softmax(y, -1) * y)};
  };
  Tensor x = random_tensor({4, 8}, DType::f32, 5);
  EagerModeGuard mode(EagerMode::defer_and_fuse);
  for (int run = 0; run < 2; ++run) eval(fn({x}));  // the first teaches the block
  reset_defer_stats();
  eval(fn({x}));
  const DeferStats run = defer_stats();

  const ir::Graph g = trace(fn, types_of({x}), kCPU)->graph;
  const NodeRanges regions = deferred_regions(g, spmd_safe());
  EXPECT_GT(run.repeat_flushes, 5u);
  EXPECT_EQ(regions.size(), run.flushes);
  // The last region, the loss, holds no view.
  EXPECT_EQ(regions.back().second - regions.back().first, run.last_region_ops);
}

// A region passes on a view's root, not the view (which the run attaches
// to its root): a later region derives the view again just before reading it.
TEST(Defer, ALaterRegionDerivesTheViewsItReads) {
  auto fn = [](const std::vector<Tensor>& in) {
    Tensor made = exp(in[0]);
    Tensor view = made.t();
    return std::vector<Tensor>{tanh(view)};
  };
  const ir::Graph g = trace(fn, types_of({random_tensor({4, 8}, DType::f32, 5)}), kCPU)->graph;
  ASSERT_EQ(g.nodes().size(), 3u);  // exp, transpose, tanh
  NodeRanges regions{{0, 2}, {2, 3}};
  const ir::Graph run = with_views_passed_as_roots(g, regions);
  EXPECT_EQ(regions, (NodeRanges{{0, 2}, {2, 4}}));
  const auto& n = run.nodes();
  ASSERT_EQ(n.size(), 4u);
  EXPECT_EQ(n[2].op, n[1].op);                  // the transpose, again
  EXPECT_EQ(n[2].inputs[0], n[0].outputs[0]);   // of the root, made before
  EXPECT_EQ(n[3].inputs[0], n[2].outputs[0]);   // read by tanh
  const RegionSegment first = extract_segment(run, 0, 2);
  ASSERT_EQ(first.outputs.size(), 1u);
  EXPECT_EQ(first.outputs[0], n[0].outputs[0]);  // the root leaves region 0
}

TEST(Defer, ViewsAliasTheirBaseAfterMaterialization) {
  EagerModeGuard mode(EagerMode::defer_and_fuse);
  Tensor base = exp(zeros({3, 4}));  // pending
  Tensor row = base.select(0, 1);    // a pending view
  Tensor col = base.t().slice(0, 2, 3);
  eval({row});
  EXPECT_EQ(row.impl().storage, base.impl().storage);
  row.fill_(5);
  EXPECT_EQ(base.to_vector<float>(), (std::vector<float>{1, 1, 1, 1, 5, 5, 5, 5, 1, 1, 1, 1}));
  EXPECT_EQ(col.to_vector<float>(), (std::vector<float>{1, 5, 1}));
}

TEST(Defer, InPlaceWritesSeeEarlierPendingReads) {
  EagerModeGuard mode(EagerMode::defer_and_fuse);
  Tensor x = ones({3});
  Tensor y = x * 2.0;  // pending read of x
  x.add_(ones({3}));   // must not change y
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{2, 2, 2}));
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{2, 2, 2}));
}

TEST(Defer, ShapeErrorsAreImmediate) {
  EagerModeGuard mode(EagerMode::defer_and_fuse);
  EXPECT_THROW(add(zeros({2}), zeros({3})), Error);  // shape errors stay immediate
}

// A flushed region may compute one value for several pending tensors (CSE)
// or pass an input through; each tensor must still own its buffer, as in
// strict mode, so an in-place write into one never shows in another.
TEST(Defer, EqualPendingTensorsStayDistinctBuffers) {
  EagerModeGuard mode(EagerMode::defer_and_fuse);
  Tensor a = ones({4}), b = ones({4});
  a.copy_(from_vector<float>({1, 2, 3, 4}, {4}));
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{1, 1, 1, 1}));

  Tensor x = from_vector<float>({1, 2, 3, 4}, {4});
  Tensor e = x * 2.0, f = x * 2.0;
  e.copy_(zeros({4}));
  EXPECT_EQ(f.to_vector<float>(), (std::vector<float>{2, 4, 6, 8}));
}

// The program merges two equal offloads into one value; the second pending
// tensor gets a copy of its own in the same pool: host memory, not the
// device's (activation offload would otherwise move values back).
TEST(Defer, AMergedOutputIsCopiedInItsPool) {
  EagerModeGuard mode(EagerMode::defer_and_fuse);
  Tensor x = exp(random_tensor({4, 8}, DType::f32, 3));
  Tensor a = offload(x), b = offload(x);
  eval({a, b});
  EXPECT_NE(a.impl().storage, b.impl().storage);
  EXPECT_EQ(a.impl().storage->pool, Pool::offload);
  EXPECT_EQ(b.impl().storage->pool, Pool::offload);
  EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>());
}

TEST(Defer, AnIdentityResultDoesNotAliasItsInput) {
  EagerModeGuard mode(EagerMode::defer_and_fuse);
  Tensor x = from_vector<float>({1, 1, 1, 1}, {4});
  x.to_vector<float>();
  Tensor y = x * 1.0;  // simplify forwards x
  y.copy_(from_vector<float>({7, 7, 7, 7}, {4}));
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{1, 1, 1, 1}));
}

}  // namespace
}  // namespace kiln
