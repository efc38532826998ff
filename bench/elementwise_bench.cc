// Elementwise throughput: kiln's add and silu on 16M floats, against a plain
// C++ loop over the same buffers in the same run (memory-bandwidth bound, so
// the loop is the ceiling). Bytes counted: inputs read + output written.
// Then mul in f32 and bf16, dense and with one factor per row (broadcast
// along the row): the broadcast should run as fast as the dense product.
// Then the transcendental ops and the row reductions built on them (16M
// uniform floats, rows of 2048 as llama3_debug's vocabulary): compute bound,
// they measure the vectorised math of kiln/codegen/vmath.h. These are timed
// in process CPU seconds, which with KILN_NUM_THREADS=1 barely move when
// other processes load the machine. Last, normal draws (weight init: 16M
// f32) against the same Box-Muller formula on libm's log and cos in a plain
// loop (how kiln drew them before: scalar).
#include <benchmark/benchmark.h>

#include <cmath>
#include <ctime>
#include <vector>

#include "kiln/backend/cpu/cpu_features.h"
#include "kiln/base/philox.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/random.h"
#include "kiln/ops/reduction.h"
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

// x * w with x [8192, 2048] and w either as large (dense) or [8192, 1] (one
// value per row, broadcast along it: MoE routing weights, norm scales), in
// f32 or bf16. Bytes: both inputs read + the output written.
void BM_KilnMul(benchmark::State& state, kiln::DType dtype, bool row_broadcast) {
  constexpr int64_t rows = kN / 2048;
  kiln::Generator g(1);
  kiln::Tensor x = kiln::uniform({rows, 2048}, -1, 1, g).to(dtype);
  kiln::Tensor w = kiln::uniform({rows, row_broadcast ? int64_t{1} : 2048}, -1, 1, g).to(dtype);
  kiln::synchronize();
  for (auto _ : state) {
    kiln::Tensor c = x * w;
    kiln::synchronize();
  }
  state.SetBytesProcessed(state.iterations() * int64_t(kiln::itemsize(dtype)) *
                          (2 * kN + w.numel()));
}

using Op = kiln::Tensor (*)(const kiln::Tensor&);

double process_cpu_seconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

// op on 16M floats uniform in [lo, hi), as [8192, 2048]; bytes as above.
void BM_KilnOp(benchmark::State& state, Op op, double lo, double hi) {
  kiln::Generator g(1);
  kiln::Tensor a = kiln::uniform({kN / 2048, 2048}, lo, hi, g);
  int64_t out_bytes = 4 * op(a).numel();
  kiln::synchronize();  // the input made and the op warmed up, untimed
  for (auto _ : state) {
    double start = process_cpu_seconds();
    kiln::Tensor c = op(a);
    kiln::synchronize();
    state.SetIterationTime(process_cpu_seconds() - start);
  }
  state.SetBytesProcessed(state.iterations() * (kN * 4 + out_bytes));
}

void BM_KilnNormal(benchmark::State& state) {
  kiln::Generator g(1);
  for (auto _ : state) {
    kiln::Tensor x = kiln::randn({kN}, g);
    kiln::synchronize();
  }
  state.SetBytesProcessed(state.iterations() * kN * 4);
}

void BM_LoopNormalLibm(benchmark::State& state) {
  std::vector<float> out(kN);
  int threads = kiln::num_threads();
  for (auto _ : state) {
#pragma omp parallel for num_threads(threads)
    for (int64_t i = 0; i < kN; ++i) {
      kiln::PhiloxBlock r = kiln::philox_block(1, uint64_t(i));
      double radius = std::sqrt(-2 * std::log(1 - kiln::unit_double(r[0], r[1])));
      out[size_t(i)] = float(radius * std::cos(2 * 3.141592653589793 * kiln::unit_double(r[2], r[3])));
    }
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * kN * 4);
}

kiln::Tensor exp(const kiln::Tensor& x) { return kiln::exp(x); }
kiln::Tensor log(const kiln::Tensor& x) { return kiln::log(x); }
kiln::Tensor tanh(const kiln::Tensor& x) { return kiln::tanh(x); }
kiln::Tensor erf(const kiln::Tensor& x) { return kiln::erf(x); }
kiln::Tensor sigmoid(const kiln::Tensor& x) { return kiln::sigmoid(x); }
kiln::Tensor gelu(const kiln::Tensor& x) { return kiln::gelu(x); }
kiln::Tensor softmax(const kiln::Tensor& x) { return kiln::softmax(x, -1); }
kiln::Tensor log_softmax(const kiln::Tensor& x) { return kiln::log_softmax(x, -1); }
kiln::Tensor logsumexp(const kiln::Tensor& x) { return kiln::logsumexp(x, {-1}); }

BENCHMARK(BM_KilnAdd)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_LoopAdd)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_KilnSilu)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_LoopSilu)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_KilnMul, f32_dense, kiln::DType::f32, false)
    ->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_KilnMul, f32_row_broadcast, kiln::DType::f32, true)
    ->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_KilnMul, bf16_dense, kiln::DType::bf16, false)
    ->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_KilnMul, bf16_row_broadcast, kiln::DType::bf16, true)
    ->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_KilnOp, exp, exp, -10, 10)->Unit(benchmark::kMillisecond)->UseManualTime();
// Inputs below -104, whose results are 0 (as masked scores, -inf, give):
// as fast as the others, with no subnormal intermediate.
BENCHMARK_CAPTURE(BM_KilnOp, exp_underflow, exp, -200, -105)
    ->Unit(benchmark::kMillisecond)->UseManualTime();
BENCHMARK_CAPTURE(BM_KilnOp, log, log, 0, 100)->Unit(benchmark::kMillisecond)->UseManualTime();
BENCHMARK_CAPTURE(BM_KilnOp, tanh, tanh, -5, 5)->Unit(benchmark::kMillisecond)->UseManualTime();
BENCHMARK_CAPTURE(BM_KilnOp, erf, erf, -3, 3)->Unit(benchmark::kMillisecond)->UseManualTime();
BENCHMARK_CAPTURE(BM_KilnOp, sigmoid, sigmoid, -10, 10)
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime();
BENCHMARK_CAPTURE(BM_KilnOp, gelu, gelu, -5, 5)->Unit(benchmark::kMillisecond)->UseManualTime();
BENCHMARK_CAPTURE(BM_KilnOp, softmax, softmax, -10, 10)
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime();
BENCHMARK_CAPTURE(BM_KilnOp, log_softmax, log_softmax, -10, 10)
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime();
BENCHMARK_CAPTURE(BM_KilnOp, logsumexp, logsumexp, -10, 10)
    ->Unit(benchmark::kMillisecond)
    ->UseManualTime();
BENCHMARK(BM_KilnNormal)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_LoopNormalLibm)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  benchmark::AddCustomContext("cpu", kiln::cpu::cpu_model());
  kiln::cpu::CpuFeatures f = kiln::cpu::cpu_features();
  benchmark::AddCustomContext("isa", f.avx512f ? "avx512f" : f.avx2 ? "avx2" : "baseline");
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
