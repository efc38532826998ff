// kiln/optim against PyTorch (tests/oracle/gen_adamw.py): AdamW steps with
// two parameter groups under a schedule, TorchTitan's schedules through
// LambdaLR, and clip_grad_norm_.
#include <gtest/gtest.h>

#include "kiln/base/error.h"
#include "kiln/optim/adamw.h"
#include "kiln/optim/clip.h"
#include "kiln/optim/schedule.h"
#include "tests/support/oracle.h"
#include "tests/support/support.h"

namespace kiln::optim {
namespace {

const test::SafeTensors& ref() { return test::oracle_file("adamw"); }
std::string key(const char* what, int step, int i) { return cat("adamw.", what, ".", step, ".", i); }

TEST(AdamWVsTorch, StepsWithGroupsAndSchedule) {
  constexpr int kParams = 3, kSteps = 6;
  std::vector<Tensor> params;
  for (int i = 0; i < kParams; ++i) params.push_back(ref().get(cat("adamw.init.", i)));
  // Group 0 (params 0, 2) decays at lr 1e-2; group 1 (the bias) does not, at lr 0.5e-2.
  ParamGroups groups{{{0.1, 1.0}, {0.0, 0.5}}, {0, 1, 0}};
  AdamW opt({0.9, 0.95, 1e-8, 0.1}, groups);
  LRSchedule sched({1e-2, 2, std::nullopt, DecayType::cosine, 0.1}, kSteps);
  AdamWState state = opt.init(params);
  for (int step = 0; step < kSteps; ++step) {
    std::vector<Tensor> grads;
    for (int i = 0; i < kParams; ++i) grads.push_back(ref().get(key("grad", step, i)));
    auto out = opt.update(params, grads, state, sched.lr(step));
    params = out.params;
    state = out.state;
    EXPECT_EQ(state.step, step + 1);
    for (int i = 0; i < kParams; ++i) {
      // torch's lerp uses a fused multiply-add: agreement to f32 rounding.
      EXPECT_TRUE(test::all_close(params[size_t(i)], ref().get(key("param", step, i)), 1e-5, 1e-6))
          << "param " << i << " after step " << step;
      EXPECT_TRUE(test::all_close(state.m[size_t(i)], ref().get(key("m", step, i)), 1e-5, 1e-7))
          << "m " << i << " after step " << step;
      EXPECT_TRUE(test::all_close(state.v[size_t(i)], ref().get(key("v", step, i)), 1e-5, 1e-9))
          << "v " << i << " after step " << step;
    }
  }
}

struct ScheduleCase {
  const char* name;
  int64_t steps, warmup;
  std::optional<double> decay_ratio;
  DecayType type;
  double min_lr_factor;
};

TEST(ScheduleVsTorch, LambdaLR) {
  // Mirrors SCHEDULES in gen_adamw.py.
  const ScheduleCase cases[] = {
      {"linear", 20, 5, std::nullopt, DecayType::linear, 0.0},
      {"cosine_min", 30, 4, std::nullopt, DecayType::cosine, 0.1},
      {"wsd_sqrt", 25, 3, 0.4, DecayType::sqrt, 0.0},
      {"wsd_cosine", 17, 2, 0.5, DecayType::cosine, 0.05},
      {"no_warmup", 10, 0, std::nullopt, DecayType::linear, 0.0},
      {"warmup_past_end", 6, 10, std::nullopt, DecayType::cosine, 0.0},
      {"constant", 8, 3, 0.0, DecayType::linear, 0.0},
  };
  for (const auto& c : cases) {
    LRSchedule s({3e-4, c.warmup, c.decay_ratio, c.type, c.min_lr_factor}, c.steps);
    auto want = ref().get(cat("schedule.", c.name)).to_vector<double>();
    ASSERT_EQ(int64_t(want.size()), c.steps) << c.name;
    for (int64_t t = 0; t < c.steps; ++t)
      EXPECT_DOUBLE_EQ(s.lr(t), want[size_t(t)]) << c.name << " step " << t;
  }
}

TEST(ClipVsTorch, GlobalNorm) {
  for (auto [name, max_norm] : {std::pair<const char*, double>{"clipped", 1.0}, std::pair<const char*, double>{"unclipped", 100.0}}) {
    std::vector<Tensor> grads;
    for (int i = 0; i < 3; ++i) grads.push_back(ref().get(cat("clip.", name, ".grad.", i)));
    ClipResult r = clip_grad_norm(grads, max_norm);
    EXPECT_TRUE(test::all_close(r.norm, ref().get(cat("clip.", name, ".norm")), 1e-6, 0)) << name;
    for (int i = 0; i < 3; ++i)
      EXPECT_TRUE(test::all_close(r.grads[size_t(i)], ref().get(cat("clip.", name, ".clipped.", i)),
                                  1e-6, 1e-7))
          << name << " grad " << i;
  }
}

}  // namespace
}  // namespace kiln::optim
