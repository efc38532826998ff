// Elementwise throughput: kiln's add and silu on 16M floats, against a plain
// C++ loop over the same buffers in the same run (memory-bandwidth bound, so
// the loop is the ceiling). Bytes counted: inputs read + output written.
#include <benchmark/benchmark.h>

#include <cmath>
#include <vector>

#include "kiln/ops/elementwise.h"
#include "kiln/runtime/threads.h"

namespace {

constexpr int64_t kN = 16 << 20;

void BM_KilnAdd(benchmark::State& state) {
  kiln::Tensor a = kiln::ones({kN}), b = kiln::ones({kN});
  for (auto _ : state) {
    kiln::Tensor c = a + b;
    kiln::synchronize();
  }
  state.SetBytesProcessed(state.iterations() * kN * 12);
}

void BM_KilnSilu(benchmark::State& state) {
  kiln::Tensor a = kiln::ones({kN});
  for (auto _ : state) {
    kiln::Tensor c = kiln::silu(a);
    kiln::synchronize();
  }
  state.SetBytesProcessed(state.iterations() * kN * 8);
}

void BM_LoopAdd(benchmark::State& state) {
  std::vector<float> a(kN, 1), b(kN, 1), c(kN);
  int threads = kiln::num_threads();
  for (auto _ : state) {
#pragma omp parallel for num_threads(threads)
    for (int64_t i = 0; i < kN; ++i) c[i] = a[i] + b[i];
    benchmark::DoNotOptimize(c.data());
  }
  state.SetBytesProcessed(state.iterations() * kN * 12);
}

void BM_LoopSilu(benchmark::State& state) {
  std::vector<float> a(kN, 1), c(kN);
  int threads = kiln::num_threads();
  for (auto _ : state) {
#pragma omp parallel for num_threads(threads)
    for (int64_t i = 0; i < kN; ++i) c[i] = a[i] / (1.0f + std::exp(-a[i]));
    benchmark::DoNotOptimize(c.data());
  }
  state.SetBytesProcessed(state.iterations() * kN * 8);
}

BENCHMARK(BM_KilnAdd)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_LoopAdd)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_KilnSilu)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_LoopSilu)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
