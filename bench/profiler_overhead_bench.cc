// What the profiler costs. Off: every kernel launch goes through the hook
// (kiln/runtime/kernel_launch.h); timing a no-op kernel called through it
// and called directly, in this one binary, measures what the hook adds to
// each launch. On: the block step (bench/block.h) in strict eager and as a
// compiled program with a capture running vs not.
//   build/bench/profiler_overhead_bench [--iters N]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>

#include "bench/block.h"
#include "kiln/backend/cpu/cpu_features.h"
#include "kiln/base/profile.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/compile.h"
#include "kiln/runtime/defer.h"
#include "kiln/runtime/kernel_launch.h"

using namespace kiln;

namespace {

int64_t g_calls = 0;
void noop_kernel(const KernelArgs&) { ++g_calls; }

double seconds(const std::function<void()>& f) {
  auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// ns per call, best of 5 rounds of `n` calls.
double per_call_ns(const std::function<void(int64_t)>& loop, int64_t n) {
  double best = 1e30;
  for (int r = 0; r < 5; ++r) best = std::min(best, seconds([&] { loop(n); }));
  return best / double(n) * 1e9;
}

double best_ms(const std::function<void()>& step, int iters) {
  step();
  synchronize();
  double best = 1e30;
  for (int i = 0; i < iters; ++i)
    best = std::min(best, seconds([&] {
                      step();
                      synchronize();
                    }) * 1e3);
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  int iters = 5;
  for (int i = 1; i + 1 < argc; ++i)
    if (!std::strcmp(argv[i], "--iters")) iters = std::atoi(argv[i + 1]);
  std::printf("cpu: %s (%s), %d threads\n", cpu::cpu_model().c_str(),
              backend(kCPU).gemm_isa(0).c_str(), num_threads());

  // The hook with the profiler off.
  Kernel k{&noop_kernel};
  ir::Attrs attrs;
  KernelArgs args{{}, {}, attrs, ir::get_op("add"), kCPU};
  Kernel* volatile kp = &k;  // not folded away
  const int64_t n = 20'000'000;
  double direct = per_call_ns(
      [&](int64_t m) { for (int64_t i = 0; i < m; ++i) kp->fn(args); }, n);
  double hooked = per_call_ns(
      [&](int64_t m) { for (int64_t i = 0; i < m; ++i) launch(*kp, args); }, n);
  std::printf("kernel launch, profiler off: %.2f ns called directly, %.2f ns through the hook "
              "(+%.2f ns a launch)\n", direct, hooked, hooked - direct);

  // A capture on.
  bench::BlockShape shape;
  std::vector<Tensor> inputs = bench::block_inputs(shape);
  auto eager = [&] { eval(bench::block_step(inputs, shape)); };
  CompiledFunction compiled =
      compile([&](const std::vector<Tensor>& a) { return bench::block_step(a, shape); });
  auto program = [&] { compiled(inputs); };
  std::printf("block fwd+bwd (batch %lld seq %lld dim %lld), best of %d\n",
              (long long)shape.batch, (long long)shape.seq, (long long)shape.dim, iters);
  std::printf("%-10s %12s %12s %8s %14s\n", "mode", "off ms", "capture ms", "ratio",
              "events (runs)");
  for (auto [name, step] : {std::pair<const char*, std::function<void()>>{"strict", eager},
                            {"compiled", program}}) {
    // Warm: a compiled program's fused kernels build in the background
    // while the first runs interpret them. Off is timed before and after on.
    best_ms(step, iters);
    double off = best_ms(step, iters);
    profile::start();
    double on = best_ms(step, iters);
    size_t events = profile::stop().events.size();
    off = std::min(off, best_ms(step, iters));
    std::printf("%-10s %12.2f %12.2f %8.3f %9zu (%d)\n", name, off, on, on / off, events,
                iters + 1);
  }
}
