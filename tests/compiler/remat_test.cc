// The activation-memory policy: full and selective recomputation give the
// bits of keeping everything, eagerly and compiled, while the backward no
// longer reads the forward's internals (full) or only the matmul outputs
// (selective), and the measured peak memory falls.
#include "kiln/compiler/remat.h"

#include <gtest/gtest.h>

#include "kiln/autograd/grad.h"
#include "kiln/compiler/pipeline.h"
#include "kiln/ir/region.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/matmul.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/views.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/compile.h"
#include "kiln/runtime/context.h"
#include "kiln/runtime/recording.h"
#include "kiln/runtime/region.h"
#include "tests/support/gradcheck.h"

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
}

TEST(Remat, SameBitsCompiled) {
  auto args = stack_args(16, 32);
  ValueAndGrad none = run(RematPolicy::none, args);
  for (RematPolicy p : {RematPolicy::full, RematPolicy::selective}) {
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

TEST(OptimizationBarrier, IsTheIdentityWithTheIdentityGradient) {
  Tensor x = random_tensor({3, 4}, DType::f64, 5);
  EXPECT_EQ(optimization_barrier(x).to_vector<double>(), x.to_vector<double>());
  EXPECT_TRUE(test::check_gradients(
      [](const std::vector<Tensor>& a) { return optimization_barrier(a[0]); }, {x}));
}

}  // namespace
}  // namespace kiln
