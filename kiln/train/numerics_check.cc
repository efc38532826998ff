#include "kiln/train/numerics_check.h"

#include <bit>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <sstream>

#include "kiln/base/error.h"
#include "kiln/train/trainer.h"

namespace fs = std::filesystem;

namespace kiln::train {
namespace {

NumericsRun run_one(TrainCommandLine cl, const Settings& extra, int64_t steps,
                    const std::string& name, std::string& tokenizer, std::ostream& log) {
  cl.settings.insert(cl.settings.end(), extra.begin(), extra.end());
  cl.print_config = false;
  TrainConfig c = load_train_config(cl);
  c.job.dump_folder = (fs::path(c.job.dump_folder) / "numerics_check" / name).string();
  fs::remove_all(c.job.dump_folder);
  c.training.steps = steps;
  c.checkpoint.enable = false;
  c.checkpoint.load_step = -1;
  c.validation.enable = false;
  c.metrics.enable_tensorboard = false;
  c.metrics.progress_bar = false;
  // The candidate reads the tokenizer the baseline learned (the same ids).
  if (c.model.tokenizer_path.empty() && !tokenizer.empty()) c.model.tokenizer_path = tokenizer;
  log << "numerics-check: " << name << " run in " << c.job.dump_folder << std::endl;
  std::ostringstream out;
  TrainResult r = run_training(c, out);
  KILN_CHECK(r.last_loss && r.last_grad_norm, "numerics-check: the ", name,
             " run trained no step; its output:\n", out.str());
  if (tokenizer.empty())
    tokenizer = c.model.tokenizer_path.empty() ? dump_tokenizer_path(c) : c.model.tokenizer_path;
  return {*r.last_loss, *r.last_grad_norm};
}

std::string describe(double a, double b) {
  std::ostringstream s;
  s << std::setprecision(9) << a << " vs " << b;
  if (a != b)
    s << " (" << ulps_apart(float(a), float(b)) << " ulps, relative " << std::setprecision(2)
      << std::abs(a - b) / std::max(std::abs(a), std::abs(b)) << ")";
  return s.str();
}

}  // namespace

const char* agreement_name(Agreement a) {
  switch (a) {
    case Agreement::identical: return "bit-identical";
    case Agreement::last_bits: return "differ in the last bits";
    case Agreement::material: return "differ materially";
  }
  return "?";
}

int64_t ulps_apart(float a, float b) {
  // Map the floats onto a line of integers ordered like the reals.
  auto key = [](float f) {
    int32_t i = std::bit_cast<int32_t>(f);
    return i < 0 ? int64_t(INT32_MIN) - int64_t(i) : int64_t(i);
  };
  return std::abs(key(a) - key(b));
}

Agreement compare_f32(double a, double b) {
  if (std::bit_cast<uint32_t>(float(a)) == std::bit_cast<uint32_t>(float(b)))
    return Agreement::identical;
  if (std::isfinite(a) && std::isfinite(b) &&
      std::abs(a - b) <= kLastBitsRelative * std::max(std::abs(a), std::abs(b)))
    return Agreement::last_bits;
  return Agreement::material;
}

NumericsReport numerics_check(const TrainCommandLine& recipe, const Settings& baseline,
                              const Settings& candidate, int64_t steps, std::ostream& log) {
  KILN_CHECK(steps >= 1, "numerics-check: --steps must be at least 1, got ", steps);
  std::string tokenizer;
  NumericsReport r;
  r.baseline = run_one(recipe, baseline, steps, "baseline", tokenizer, log);
  r.candidate = run_one(recipe, candidate, steps, "candidate", tokenizer, log);
  r.loss = compare_f32(r.baseline.loss, r.candidate.loss);
  r.grad_norm = compare_f32(r.baseline.grad_norm, r.candidate.grad_norm);
  return r;
}

void print_report(const NumericsReport& r, std::ostream& out) {
  out << "loss:      " << agreement_name(r.loss) << ": "
      << describe(r.baseline.loss, r.candidate.loss) << "\n"
      << "grad_norm: " << agreement_name(r.grad_norm) << ": "
      << describe(r.baseline.grad_norm, r.candidate.grad_norm) << "\n"
      << "verdict:   " << agreement_name(r.overall());
  if (r.overall() == Agreement::last_bits)
    out << " (within " << kLastBitsRelative << " relative: rounding, a different order of operations)";
  if (r.overall() == Agreement::material)
    out << " (beyond " << kLastBitsRelative << " relative: a different computation)";
  out << std::endl;
}

}  // namespace kiln::train
