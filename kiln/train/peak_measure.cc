#include "kiln/train/peak_measure.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iomanip>
#include <sstream>

#include "kiln/base/error.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/build_id.h"
#include "kiln/runtime/threads.h"

namespace kiln::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string fixed1(double x) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(1) << x;
  return s.str();
}

// This CPU's model, ISA, the thread count and this build: what a
// measurement holds for.
Peak cpu_key(int threads) {
  Backend& b = backend(kCPU);
  Peak key;
  key.cpu = b.model(0);
  key.onednn_isa = b.gemm_isa(0);
  key.threads = threads;
  key.build = kiln_build_id();
  return key;
}

std::string describe_source(const PeakLookup& r, DType compute, const std::string& path) {
  const Peak& p = r.peak;
  std::string what = cat(fixed1(peak_gflops(p, compute)), " GFLOP/s ", dtype_name(compute),
                         " GEMM peak on ", p.threads, " threads");
  if (!r.measured_now)
    return p.method == "thorough"
               ? cat(what, ", measured by `kiln bench peak` (cached in ", path, ")")
               : cat(what, ", measured quickly on first use (cached in ", path,
                     "; `kiln bench peak` measures it thoroughly)");
  return cat(what, ", measured on first use (", fixed1(p.seconds), " s, ",
             r.cache_error.empty() ? "cached in " + path : "not cached: " + r.cache_error,
             "; `kiln bench peak` measures it thoroughly)");
}

}  // namespace

PeakBudget thorough_peak_budget() {
  // A large square product and the two projection shapes of a transformer
  // MLP as a Linear runs them (x @ W^T): tokens x d_ff x d_model and back.
  return {"thorough",
          {{2048, 2048, 2048},
           {4096, 3072, 768, DType::f32, false, true},
           {4096, 768, 3072, DType::f32, false, true}}};
}

PeakBudget quick_peak_budget() {
  PeakBudget b{"quick",
               {{1024, 3072, 768, DType::f32, false, true},
                {1024, 768, 3072, DType::f32, false, true}},
               /*max_seconds=*/1.5};
  for (GemmSpec& s : b.shapes) s.batches = 3, s.batch_seconds = 0.05;
  return b;
}

Peak measure_peak(const PeakBudget& budget, int threads, DType first, std::ostream* log) {
  const auto start = Clock::now();
  Peak p = cpu_key(threads);
  p.method = budget.method;
  const DType second = first == DType::bf16 ? DType::f32 : DType::bf16;
  double last = 0;  // the previous GEMM's wall time: what the next is expected to take
  for (DType dtype : {first, second}) {
    double& best = dtype == DType::bf16 ? p.bf16_gflops : p.f32_gflops;
    for (GemmSpec s : budget.shapes) {
      if (budget.max_seconds > 0 && last > 0 && seconds_since(start) + last > budget.max_seconds)
        break;
      s.dtype = dtype;
      s.threads = threads;
      auto t0 = Clock::now();
      GemmTiming t = time_gemm(s);
      last = seconds_since(t0);
      if (log)
        *log << "  " << describe(s) << ": " << fixed1(t.busy_gflops) << " GFLOP/s ("
             << fixed1(t.gflops) << " by the clock; the process had "
             << int(std::lround(100 * t.cpu_share)) << "% of its threads' time)\n"
             << std::flush;
      best = std::max(best, t.busy_gflops);
    }
  }
  p.seconds = seconds_since(start);
  return p;
}

std::optional<DevicePeak> run_peak(Device device, DType compute, int threads) {
  if (device.kind != DeviceKind::cpu) return table_peak(device, compute);
  if (compute != DType::bf16 && compute != DType::f32) return std::nullopt;
  auto quick = [&] { return measure_peak(quick_peak_budget(), threads, compute, nullptr); };
  std::filesystem::path path;
  PeakLookup r;
  try {
    path = peak_cache_path();
  } catch (const Error& e) {  // no place for a cache: measure for this run alone
    r = {quick(), true, e.what()};
  }
  if (!path.empty()) r = cached_or_measured_peak(path, cpu_key(threads), compute, quick);
  double gflops = peak_gflops(r.peak, compute);
  if (gflops <= 0) return std::nullopt;
  return DevicePeak{gflops * 1e9, describe_source(r, compute, path.string())};
}

double measured_gemm_tflops(Device device, DType dtype) {
  GemmSpec s;
  s.m = s.n = s.k = 8192;
  s.dtype = dtype;
  s.device = device;
  s.threads = num_threads();
  s.batches = 3;
  s.batch_seconds = 0.05;
  return time_gemm(s).gflops / 1e3;
}

}  // namespace kiln::train
