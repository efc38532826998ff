// kiln/optim pieces checked by hand: parameter groups, the AdamW update
// against a scalar loop, dtypes under mixed precision, gradient accumulation,
// state serialisation and option errors. (tests/optim/adamw_oracle_test.cc
// compares with PyTorch.)
#include <gtest/gtest.h>

#include <cmath>

#include "kiln/base/error.h"
#include "kiln/autograd/grad.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/reduction.h"
#include "kiln/optim/accumulate.h"
#include "kiln/optim/adamw.h"
#include "kiln/optim/clip.h"
#include "kiln/optim/mixed_precision.h"
#include "kiln/optim/schedule.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/context.h"
#include "tests/support/support.h"

namespace kiln::optim {
namespace {

TEST(ParamGroups, NormsBiasesAndEmbeddingsSkipDecay) {
  std::vector<std::string> names{"model.embed_tokens.weight", "model.layers.0.mlp.up_proj.weight",
                                 "model.norm.weight", "lm_head.weight"};
  std::vector<Tensor> p{zeros({8, 4}), zeros({4, 4}), zeros({4}), zeros({8, 4})};
  ParamGroups g = default_param_groups(names, p, 0.1);
  EXPECT_EQ(g.group, (std::vector<int>{1, 0, 1, 0}));
  EXPECT_EQ(g.groups[0].weight_decay, 0.1);
  EXPECT_EQ(g.groups[1].weight_decay, 0.0);
  EXPECT_EQ(default_param_groups(names, p, 0.1, true).group, (std::vector<int>{0, 0, 0, 0}));
}

TEST(AdamW, MatchesAScalarLoop) {
  const double lr = 0.01, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1;
  std::vector<double> p{0.5, -1.0, 2.0}, m(3), v(3);
  AdamW opt({b1, b2, eps, wd}, 1);
  std::vector<Tensor> params{from_vector<double>(p, {3})};
  AdamWState s = opt.init(params);
  EXPECT_EQ(s.m[0].dtype(), DType::f64);
  for (int t = 1; t <= 4; ++t) {
    std::vector<double> g{0.3 * t, -0.2, 1.0 / t};
    for (int i = 0; i < 3; ++i) {
      p[size_t(i)] *= 1 - lr * wd;
      m[size_t(i)] = b1 * m[size_t(i)] + (1 - b1) * g[size_t(i)];
      v[size_t(i)] = b2 * v[size_t(i)] + (1 - b2) * g[size_t(i)] * g[size_t(i)];
      double mh = m[size_t(i)] / (1 - std::pow(b1, t)), vh = v[size_t(i)] / (1 - std::pow(b2, t));
      p[size_t(i)] -= lr * mh / (std::sqrt(vh) + eps);
    }
    auto out = opt.update(params, {from_vector<double>(g, {3})}, s, lr);
    params = out.params;
    s = out.state;
    // The step's scalars are f32 tensors: agreement to f32 rounding.
    EXPECT_TRUE(test::all_close(params[0].to_vector<double>(), p, 1e-6, 1e-7)) << "step " << t;
  }
  EXPECT_EQ(s.step, 4);
}

TEST(AdamW, Bf16ParametersKeepF32State) {
  AdamW opt({}, 1);
  std::vector<Tensor> params{full({4}, 1.0, DType::bf16)};
  AdamWState s = opt.init(params);
  EXPECT_EQ(s.m[0].dtype(), DType::f32);
  auto out = opt.update(params, {full({4}, 0.5, DType::bf16)}, s, 1e-2);
  EXPECT_EQ(out.params[0].dtype(), DType::bf16);
  EXPECT_EQ(out.state.v[0].dtype(), DType::f32);
  EXPECT_LT(out.params[0].to_vector<float>()[0], 1.0f);
}

TEST(AdamW, StateRoundTripAndErrors) {
  AdamW opt({}, 2);
  std::vector<Tensor> params{zeros({2, 2}), zeros({3})};
  auto out = opt.update(params, {ones({2, 2}), ones({3})}, opt.init(params), 1e-3);
  NamedTensors named = adamw_state_tensors(out.state, {"a", "b"});
  ASSERT_EQ(named.size(), 4u);
  EXPECT_EQ(named[0].first, "optim.m.a");
  std::map<std::string, Tensor> map(named.begin(), named.end());
  AdamWState back = adamw_state_from_tensors(map, 1, {"a", "b"}, params);
  EXPECT_EQ(back.v[1].to_vector<float>(), out.state.v[1].to_vector<float>());
  map.erase("optim.v.b");
  EXPECT_THROW(adamw_state_from_tensors(map, 1, {"a", "b"}, params), Error);
  EXPECT_EQ(adamw_state_json(out.state, opt.options())["step"], 1);

  EXPECT_THROW(AdamW({1.0, 0.95}, 1), Error);
  EXPECT_THROW(opt.update(params, {ones({2, 2})}, out.state, 1e-3), Error);
  EXPECT_THROW(opt.update(params, {ones({2, 3}), ones({3})}, out.state, 1e-3), Error);
  EXPECT_THROW(opt.scalars(0, 1e-3), Error);
}

// Moved in, the parameters, gradients and moments go one by one as their
// updates are issued: the old and the new state are never held whole
// together (here in program order: eager debug mode).
TEST(AdamW, GivenUpStateGoesAsTheUpdateRuns) {
  EagerModeGuard debug(EagerMode::debug);
  const int n = 8;
  const int64_t mib = 1 << 20;
  AdamW opt({}, n);
  std::vector<Tensor> params, grads;
  for (int i = 0; i < n; ++i) {
    params.push_back(full({mib / 4}, 1.0));  // 1 MiB of f32 each
    grads.push_back(full({mib / 4}, 0.5));
  }
  AdamWState state = opt.init(params);
  const AdamWScalars scalars = opt.scalars(1, 1e-3);
  synchronize();
  const int64_t before = memory_stats().allocated;  // p, g, m and v: 4n MiB
  reset_peak_memory();
  AdamWUpdate out = opt.update(std::move(params), std::move(grads), std::move(state), scalars);
  synchronize();
  EXPECT_EQ(memory_stats().allocated, before - n * mib) << "the new p, m and v alone";
  EXPECT_LE(memory_stats().peak_allocated, before + 4 * mib) << "one parameter's temporaries at a time";
}

TEST(AdamW, TraceableUpdate) {
  // The update records under value_and_grad's trace like any tensor code.
  AdamW opt({}, 1);
  auto vg = value_and_grad([&](const std::vector<Tensor>& x) {
    auto out = opt.update({x[0]}, {x[0] * 2.0}, opt.init({x[0]}), opt.scalars(1, 0.1));
    return std::vector<Tensor>{sum(out.params[0])};
  });
  auto r = vg({full({3}, 1.0)});
  EXPECT_EQ(r.grads[0].shape(), Shape({3}));
}

TEST(Clip, NormAndNoClip) {
  std::vector<Tensor> g{from_vector<float>({3, 0}, {2}), from_vector<float>({4}, {1})};
  ClipResult r = clip_grad_norm(g, 1.0);
  EXPECT_NEAR(r.norm.item<float>(), 5.0f, 1e-6);
  EXPECT_NEAR(r.grads[1].to_vector<float>()[0], 4.0f / (5.0f + 1e-6f), 1e-6);
  ClipResult n = clip_grad_norm(g, 0);
  EXPECT_EQ(n.grads[0].to_vector<float>(), (std::vector<float>{3, 0}));
  EXPECT_THROW(global_norm({}), Error);
}

TEST(Accumulate, MeanOfMicrobatchesInOriginalDtypes) {
  GradAccumulator acc(3);
  acc.add({from_vector<float>({1, 2}, {2}), full({1}, 1.0, DType::bf16)});
  acc.add({from_vector<float>({3, 4}, {2}), full({1}, 2.0, DType::bf16)});
  EXPECT_FALSE(acc.complete());
  EXPECT_THROW(acc.take(), Error);
  acc.add({from_vector<float>({5, 9}, {2}), full({1}, 6.0, DType::bf16)});
  auto g = acc.take();
  EXPECT_EQ(g[0].to_vector<float>(), (std::vector<float>{3, 5}));
  EXPECT_EQ(g[1].dtype(), DType::bf16);
  EXPECT_EQ(g[1].to_vector<float>()[0], 3.0f);
  EXPECT_EQ(acc.count(), 0);
  EXPECT_THROW(GradAccumulator(0), Error);
}

TEST(MixedPrecision, Policy) {
  auto p = MixedPrecisionPolicy::from_name("bfloat16");
  EXPECT_EQ(p.param_dtype, DType::bf16);
  EXPECT_EQ(p.master_dtype, DType::f32);
  auto masters = p.master_params({full({2}, 1.5, DType::bf16)});
  EXPECT_EQ(masters[0].dtype(), DType::f32);
  EXPECT_EQ(p.compute_params(masters)[0].dtype(), DType::bf16);
  // Gradients through the cast come back in the masters' dtype.
  auto vg = value_and_grad([&](const std::vector<Tensor>& x) {
    return std::vector<Tensor>{sum(p.compute_params(x)[0] * p.compute_params(x)[0]).to(DType::f32)};
  });
  EXPECT_EQ(vg(masters).grads[0].dtype(), DType::f32);
  EXPECT_THROW(MixedPrecisionPolicy::from_name("int8"), Error);
}

TEST(Schedule, ShapesAndErrors) {
  LRSchedule s({1.0, 2, 0.5, DecayType::linear, 0.0}, 10);
  EXPECT_EQ(s.warmup_steps(), 2);
  EXPECT_EQ(s.decay_steps(), 5);
  EXPECT_EQ(s.stable_steps(), 4);
  EXPECT_DOUBLE_EQ(s.lr(0), 0.5);
  EXPECT_DOUBLE_EQ(s.lr(1), 1.0);
  EXPECT_DOUBLE_EQ(s.lr(5), 1.0);
  EXPECT_DOUBLE_EQ(s.lr(6), 0.8);
  EXPECT_DOUBLE_EQ(s.lr(9), 0.2);
  EXPECT_EQ(s.to_json()["decay_type"], "linear");
  EXPECT_THROW(LRSchedule({1.0}, 0), Error);
  EXPECT_THROW(LRSchedule({1.0, -1}, 5), Error);
  EXPECT_THROW(LRSchedule({1.0, 0, 1.5}, 5), Error);
  EXPECT_THROW(parse_decay_type("step"), Error);
  EXPECT_EQ(parse_decay_type("cosine"), DecayType::cosine);
}

}  // namespace
}  // namespace kiln::optim
