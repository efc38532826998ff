// A Llama-style block (dim 512, 8 heads, seq 256, batch 4) forward +
// backward in strict eager, defer_and_fuse and compile(fn), timed in one
// process with peak memory from kiln's allocator. Prints a table with
// ratios against strict.
//   build/bench/modes_bench [--iters N]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>

#include "bench/block.h"
#include "kiln/runtime/compile.h"
#include "kiln/runtime/defer.h"

using namespace kiln;

struct Result {
  double ms;
  int64_t peak;
};

Result measure(const std::function<void()>& step, int iters) {
  step();  // warm up: caches, compiled programs, oneDNN primitives
  synchronize();
  double best = 1e30;
  int64_t peak = 0;
  for (int i = 0; i < iters; ++i) {
    reset_peak_memory();
    auto t0 = std::chrono::steady_clock::now();
    step();
    synchronize();
    best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    peak = std::max(peak, memory_stats().peak_allocated);
  }
  return {best, peak};
}

int main(int argc, char** argv) {
  int iters = 5;
  for (int i = 1; i + 1 < argc; ++i)
    if (!std::strcmp(argv[i], "--iters")) iters = std::atoi(argv[i + 1]);
  bench::BlockShape shape;
  std::vector<Tensor> inputs = bench::block_inputs(shape);
  synchronize();
  int64_t base = memory_stats().allocated;
  auto eager = [&](EagerMode m) {
    return [&, m] {
      EagerModeGuard g(m);
      std::vector<Tensor> out = bench::block_step(inputs, shape);
      eval(out);
    };
  };
  CompiledFunction compiled = compile([&](const std::vector<Tensor>& a) { return bench::block_step(a, shape); });
  Result strict = measure(eager(EagerMode::strict), iters);
  Result defer = measure(eager(EagerMode::defer_and_fuse), iters);
  Result comp = measure([&] { compiled(inputs); }, iters);
  std::printf("block fwd+bwd, batch %lld seq %lld dim %lld heads %lld, %d threads, best of %d\n",
              (long long)shape.batch, (long long)shape.seq, (long long)shape.dim, (long long)shape.heads,
              num_threads(), iters);
  std::printf("%-16s %10s %9s %14s %10s\n", "mode", "ms", "speedup", "peak MiB", "mem ratio");
  auto row = [&](const char* name, Result r) {
    std::printf("%-16s %10.2f %9.2f %14.1f %10.2f\n", name, r.ms, strict.ms / r.ms,
                double(r.peak - base) / (1 << 20), double(r.peak - base) / double(strict.peak - base));
  };
  row("strict", strict);
  row("defer_and_fuse", defer);
  row("compile", comp);
  std::printf("defer regions per step: %zu (last: %zu ops)\n", defer_stats().flushes / size_t(iters + 1),
              defer_stats().last_region_ops);
}
