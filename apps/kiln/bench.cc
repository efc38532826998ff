// `kiln bench ...`: micro-benchmarks users run on their own machine.
#include <iomanip>
#include <iostream>
#include <memory>

#include "apps/kiln/commands.h"
#include "kiln/backend/cpu/cpu_features.h"
#include "kiln/backend/cpu/matmul_path.h"
#include "kiln/runtime/threads.h"
#include "kiln/train/gemm_timing.h"
#include "kiln/train/peak_measure.h"

namespace kiln::cli {
namespace {

using train::GemmSpec;

// Readable limits for sizes and counts (CLI::PositiveNumber prints DBL_MAX).
const CLI::Range kSize(1, 1 << 30);
const CLI::Range kCount(1, 1 << 20);
const CLI::Range kThreads(1, kMaxThreads);

void add_gemm(CLI::App& bench) {
  auto* cmd =
      bench.add_subcommand("gemm", "Time kiln's matmul on one shape; the last line is GFLOP/s");
  auto spec = std::make_shared<GemmSpec>();
  auto dtype = std::make_shared<std::string>("f32");
  cmd->add_option("--m", spec->m, "Rows of A and of the product")
      ->required()
      ->check(kSize);
  cmd->add_option("--n", spec->n, "Columns of B and of the product")
      ->required()
      ->check(kSize);
  cmd->add_option("--k", spec->k, "The inner (summed) dimension")
      ->required()
      ->check(kSize);
  cmd->add_option("--dtype", *dtype, "Element type")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->capture_default_str();
  cmd->add_flag("--ta", spec->ta, "A is stored [K,M]");
  cmd->add_flag("--tb", spec->tb, "B is stored [N,K] (a Linear weight)");
  cmd->add_option("--threads", spec->threads, "Kernel threads")
      ->check(kThreads)
      ->capture_default_str();
  cmd->add_option("--iters", spec->iters, "Calls per timed batch (default: about 0.2 s worth)")
      ->check(kCount);
  cmd->callback([spec, dtype] {
    spec->dtype = parse_dtype(*dtype);
    std::cout << "gemm " << train::describe(*spec) << " (MxNxK), " << spec->threads
              << " threads, oneDNN isa " << cpu::onednn_isa() << "\n"
              << cpu::matmul_path_text(spec->dtype) << "\n"
              << std::flush;
    train::GemmTiming t = train::time_gemm(*spec);
    std::cout << std::fixed << std::setprecision(3) << "time per call: " << t.seconds * 1e3
              << " ms (best of " << t.batches << " batches of " << t.iters << " calls)\n";
    std::cout << std::setprecision(1) << "with the cores to itself: " << t.busy_gflops
              << " GFLOP/s (the process had " << 100 * t.cpu_share << "% of its threads' time)\n"
              << "GFLOP/s: " << t.gflops << "\n";
  });
}

void add_peak(CLI::App& bench) {
  auto* cmd = bench.add_subcommand(
      "peak", "Measure this CPU's sustained GEMM peak (bf16 and f32) and cache it for MFU");
  auto threads = std::make_shared<int>(num_threads());
  cmd->add_option("--threads", *threads, "Kernel threads")
      ->check(kThreads)
      ->capture_default_str();
  cmd->callback([threads] {
    std::cout << "measuring the GEMM peak of " << cpu::cpu_model() << " (oneDNN isa "
              << cpu::onednn_isa() << ") on " << *threads << " threads\n"
              << cpu::matmul_path_text(DType::bf16) << "\n"
              << std::flush;
    Peak p = train::measure_peak(train::thorough_peak_budget(), *threads, DType::bf16, &std::cout);
    std::filesystem::path path = peak_cache_path();
    save_peak(p, path);
    std::cout << std::fixed << std::setprecision(1) << "peak bf16: " << p.bf16_gflops
              << " GFLOP/s\n"
              << "peak f32: " << p.f32_gflops << " GFLOP/s\n"
              << "saved to " << path.string() << " (for the MFU of runs on " << *threads
              << " threads)\n";
  });
}

}  // namespace

void add_bench(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "Measure kiln's kernels on this machine");
  cmd->require_subcommand(1);
  add_gemm(*cmd);
  add_peak(*cmd);
}

}  // namespace kiln::cli
