// Learning-rate schedules, as TorchTitan builds them (LambdaLR over its
// linear_warmup_stable_decay): the learning rate of update number t
// (0-based: the first update uses t = 0) is lr * factor(t), with
//
//   t < warmup:                 factor = (t + 1) / warmup
//   t < warmup + stable:        factor = 1
//   otherwise:                  p = (t + 1 - warmup - stable) / decay
//                               factor = min + (1 - min) * d(p)
//   d(p) = 1 - p (linear), 1 - sqrt(p) (sqrt), (1 + cos(pi p)) / 2 (cosine)
//
// where, for `steps` training steps: warmup = min(warmup_steps, steps);
// decay = round(steps * decay_ratio) when decay_ratio is set (WSD: a stable
// phase, then decay over that fraction; capped at steps - warmup), else
// steps - warmup; stable = steps + 1 - warmup - decay (the "+ 1" is
// TorchTitan's virtual last step that keeps the last update's lr above
// min). decay_ratio = 0 gives warmup then a constant learning rate.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::optim {

enum class DecayType { linear, sqrt, cosine };
// "linear" | "sqrt" | "cosine"; else a kiln::Error listing them.
DecayType parse_decay_type(std::string_view name);
std::vector<std::string> decay_type_names();  // what parse_decay_type accepts
const char* decay_type_name(DecayType type);

struct ScheduleOptions {
  double lr = 8e-4;
  int64_t warmup_steps = 0;
  std::optional<double> decay_ratio;  // set: warmup-stable-decay
  DecayType decay_type = DecayType::linear;
  double min_lr_factor = 0.0;
};

class LRSchedule {
 public:
  // Throws kiln::Error on steps < 1, warmup < 0, decay_ratio outside
  // [0, 1] or min_lr_factor outside [0, 1].
  LRSchedule(const ScheduleOptions& options, int64_t steps);

  double factor(int64_t t) const;
  double lr(int64_t t) const { return options_.lr * factor(t); }

  int64_t warmup_steps() const { return warmup_; }
  int64_t stable_steps() const { return stable_; }
  int64_t decay_steps() const { return decay_; }
  const ScheduleOptions& options() const { return options_; }

  // The schedule is a pure function of t; its checkpoint state records the
  // options and steps so that a resumed run can tell when they changed.
  nlohmann::json to_json() const;

 private:
  ScheduleOptions options_;
  int64_t steps_, warmup_, stable_, decay_;
};

}  // namespace kiln::optim
