#include "kiln/optim/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "kiln/base/error.h"

namespace kiln::optim {
namespace {
constexpr const char* kDecayNames[] = {"linear", "sqrt", "cosine"};
}

DecayType parse_decay_type(std::string_view name) {
  for (int i = 0; i < 3; ++i)
    if (name == kDecayNames[i]) return DecayType(i);
  fail("unknown lr_scheduler.decay_type '", name, "': expected linear, sqrt or cosine");
}
const char* decay_type_name(DecayType type) { return kDecayNames[int(type)]; }
std::vector<std::string> decay_type_names() { return {std::begin(kDecayNames), std::end(kDecayNames)}; }

LRSchedule::LRSchedule(const ScheduleOptions& options, int64_t steps)
    : options_(options), steps_(steps) {
  KILN_CHECK(steps >= 1, "the learning-rate schedule needs training.steps >= 1, not ", steps);
  KILN_CHECK(options.warmup_steps >= 0, "lr_scheduler.warmup_steps must be >= 0, not ",
             options.warmup_steps);
  KILN_CHECK(!options.decay_ratio || (*options.decay_ratio >= 0 && *options.decay_ratio <= 1),
             "lr_scheduler.decay_ratio must be in [0, 1], not ", options.decay_ratio.value_or(0));
  KILN_CHECK(options.min_lr_factor >= 0 && options.min_lr_factor <= 1,
             "lr_scheduler.min_lr_factor must be in [0, 1], not ", options.min_lr_factor);
  warmup_ = std::min(options.warmup_steps, steps);
  if (options.decay_ratio) {
    // Python's round(): halves to even, as std::nearbyint in the default mode.
    decay_ = int64_t(std::nearbyint(double(steps) * *options.decay_ratio));
    decay_ = std::min(decay_, steps - warmup_);
  } else {
    decay_ = steps - warmup_;
  }
  stable_ = steps + 1 - warmup_ - decay_;
}

double LRSchedule::factor(int64_t t) const {
  if (t < warmup_) return double(t + 1) / double(warmup_);
  if (t < warmup_ + stable_ || decay_ == 0) return 1.0;
  double p = std::min(1.0, double(t + 1 - warmup_ - stable_) / double(decay_));
  double d = 0;
  switch (options_.decay_type) {
    case DecayType::linear: d = 1 - p; break;
    case DecayType::sqrt: d = 1 - std::sqrt(p); break;
    case DecayType::cosine: d = 0.5 * (1.0 + std::cos(std::numbers::pi * p)); break;
  }
  return options_.min_lr_factor + (1 - options_.min_lr_factor) * d;
}

nlohmann::json LRSchedule::to_json() const {
  nlohmann::json j = {{"lr", options_.lr},
                      {"warmup_steps", warmup_},
                      {"stable_steps", stable_},
                      {"decay_steps", decay_},
                      {"decay_type", decay_type_name(options_.decay_type)},
                      {"min_lr_factor", options_.min_lr_factor},
                      {"steps", steps_}};
  return j;
}

}  // namespace kiln::optim
