// `kiln numerics-check`: runs the first step(s) of one recipe under two flag
// sets (a baseline and a candidate: another rung of the ladder, a fused
// kernel, another mesh) and says whether the loss and the gradient norm are
// bit-identical, differ in the last bits (rounding: a different but valid
// order of operations), or differ materially (a bug, or a change of math),
// as the TorchTitan-on-TPU seed recommends after every flag change.
#pragma once
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "kiln/train/config.h"

namespace kiln::train {

enum class Agreement { identical, last_bits, material };
const char* agreement_name(Agreement a);

// f32 values (the loss and norm are f32): identical bits; within
// kLastBitsRelative of each other; or further apart.
constexpr double kLastBitsRelative = 1e-5;
Agreement compare_f32(double a, double b);
// Units in the last place between two f32 values.
int64_t ulps_apart(float a, float b);

struct NumericsRun {
  double loss = 0, grad_norm = 0;
};

struct NumericsReport {
  NumericsRun baseline, candidate;
  Agreement loss = Agreement::identical, grad_norm = Agreement::identical;
  Agreement overall() const { return std::max(loss, grad_norm); }
};

using Settings = std::vector<std::pair<std::string, std::string>>;

// Runs `steps` steps of `recipe` (its command line: --config, settings) with
// `baseline` then with `candidate` settings appended, each in a fresh
// folder under the recipe's dump folder (numerics_check/baseline,
// numerics_check/candidate), checkpoints and validation off; compares the
// last step's loss and gradient norm. Progress goes to `log`.
NumericsReport numerics_check(const TrainCommandLine& recipe, const Settings& baseline,
                              const Settings& candidate, int64_t steps, std::ostream& log);

// The report as the CLI prints it.
void print_report(const NumericsReport& r, std::ostream& out);

}  // namespace kiln::train
