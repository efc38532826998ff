// The fused ops against the plain ops they replace, on one run so that the
// ratios compare like with like. Each iteration runs the fused version and
// the reference back to back; the counters are each one's best time (ms),
// their ratio (speedup = reference / fused) and each one's peak memory above
// what was allocated before the call (MiB, kiln::memory_stats: tensors and
// the fused kernels' scratch, which comes from the same allocator).
//
//   flash attention vs scaled_dot_product_attention (its composite: scores
//     materialised), causal, B=1, Hq=8, Hkv=2, D=128, f32 and bf16, seq
//     512/2048/8192; forward, and forward + backward (value_and_grad of
//     sum(out * cot)); and llama3_100m's attention (B=4, Hq=12, Hkv=4,
//     D=64, seq 256, bf16: many short sequences).
//   linear_cross_entropy vs cross_entropy(matmul(h, w^T)), 4096 tokens,
//     dim 2048, vocab 128256 / 151936, f32 and bf16, forward + backward;
//     and llama3_100m's (1024 tokens, dim 768, vocab 16384, bf16).
//   grouped_matmul vs one matmul per expert (slices and a concat; its
//     backward written the same way by hand), 64 and 128 experts, 4096
//     routed rows, K=2048, N=768, f32 and bf16; forward, and forward +
//     backward (value_and_grad of sum(y * dy) for the fused op).
//   silu_mul vs silu(gate) * up, llama3_100m's MLP ([1024, 2048]), f32 and
//     bf16; forward, and forward + backward.
//
// Threads: KILN_NUM_THREADS (default: every hardware thread). Select with
// --benchmark_filter (e.g. 'attention', 'lce', 'grouped'). Set
// KILN_BENCH_FUSED_ONLY=1 to skip the references (the composite attention
// backward at seq 8192 needs more than 20 GiB).
#include <benchmark/benchmark.h>

#include <time.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>

#include "kiln/autograd/grad.h"
#include "kiln/ops/elementwise.h"
#include "kiln/ops/fused_kernels.h"
#include "kiln/ops/matmul.h"
#include "kiln/ops/reduction.h"
#include "kiln/ops/shape.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/threads.h"

namespace {

using kiln::DType;
using kiln::Tensor;

struct Run {
  double seconds, cpu_seconds, peak_mib;
};

double cpu_now() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

Run measure(const std::function<std::vector<Tensor>()>& f) {
  kiln::synchronize();
  int64_t base = kiln::memory_stats().allocated;
  kiln::reset_peak_memory();
  auto start = std::chrono::steady_clock::now();
  double cpu = cpu_now();
  {
    std::vector<Tensor> out = f();
    kiln::synchronize();
  }
  cpu = cpu_now() - cpu;
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return {s, cpu, double(kiln::memory_stats().peak_allocated - base) / (1 << 20)};
}

// Runs both once to warm up, then alternately; reports best times and peaks.
void compare(benchmark::State& state, const std::function<std::vector<Tensor>()>& fused,
             const std::function<std::vector<Tensor>()>& reference) {
  const bool with_ref = !std::getenv("KILN_BENCH_FUSED_ONLY");
  auto keep_best = [](Run& best, const Run& now) {
    best = {std::min(best.seconds, now.seconds), std::min(best.cpu_seconds, now.cpu_seconds),
            std::max(best.peak_mib, now.peak_mib)};
  };
  Run f = measure(fused), r{};
  if (with_ref) r = measure(reference);
  for (auto _ : state) {
    keep_best(f, measure(fused));
    if (with_ref) keep_best(r, measure(reference));
  }
  state.counters["fused_ms"] = f.seconds * 1e3;
  state.counters["fused_cpu_ms"] = f.cpu_seconds * 1e3;
  state.counters["fused_MiB"] = f.peak_mib;
  state.counters["threads"] = kiln::num_threads();
  if (!with_ref) return;
  state.counters["ref_ms"] = r.seconds * 1e3;
  state.counters["ref_cpu_ms"] = r.cpu_seconds * 1e3;
  state.counters["ref_MiB"] = r.peak_mib;
  state.counters["speedup"] = r.seconds / f.seconds;
  state.counters["cpu_speedup"] = r.cpu_seconds / f.cpu_seconds;
}

Tensor randn(const kiln::Shape& s, DType dt, uint64_t seed, double scale = 1) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> n(0, float(scale));
  std::vector<float> v(size_t(s.numel()));
  for (float& x : v) x = n(rng);
  return kiln::from_vector(v, s).to(dt);
}

// value_and_grad of sum(f(args) * cot) with respect to the floating args.
std::vector<Tensor> loss_and_grads(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                                   const std::vector<Tensor>& args, const Tensor& cot) {
  auto vag = kiln::value_and_grad([&](const std::vector<Tensor>& a) {
    Tensor y = f(a);
    return std::vector<Tensor>{cot.defined() ? kiln::sum(y * cot) : y};
  });
  kiln::ValueAndGrad r = vag(args);
  std::vector<Tensor> out = r.values;
  out.insert(out.end(), r.grads.begin(), r.grads.end());
  return out;
}

struct AttentionShape {
  int64_t b, hq, hkv, d;
};

void attention(benchmark::State& state, AttentionShape shape, int64_t seq, DType dt,
               bool backward) {
  const auto [b, hq, hkv, d] = shape;
  Tensor q = randn({b, hq, seq, d}, dt, 1), k = randn({b, hkv, seq, d}, dt, 2),
         v = randn({b, hkv, seq, d}, dt, 3), cot = randn({b, hq, seq, d}, dt, 4);
  kiln::AttentionOptions o{.causal = true};
  auto flash = [o](const std::vector<Tensor>& a) { return kiln::flash_attention(a[0], a[1], a[2], o); };
  auto sdpa = [o](const std::vector<Tensor>& a) {
    return kiln::scaled_dot_product_attention(a[0], a[1], a[2], o);
  };
  if (backward)
    compare(state, [&] { return loss_and_grads(flash, {q, k, v}, cot); },
            [&] { return loss_and_grads(sdpa, {q, k, v}, cot); });
  else
    compare(state, [&] { return std::vector<Tensor>{flash({q, k, v})}; },
            [&] { return std::vector<Tensor>{sdpa({q, k, v})}; });
}

void lce(benchmark::State& state, int64_t tokens, int64_t dim, int64_t vocab, DType dt) {
  Tensor h = randn({tokens, dim}, dt, 1), w = randn({vocab, dim}, dt, 2, 0.02);
  std::vector<int64_t> t(tokens);
  std::mt19937_64 rng(3);
  for (auto& x : t) x = int64_t(rng() % uint64_t(vocab));
  Tensor targets = kiln::from_vector(t, {tokens});
  auto fused = [&](const std::vector<Tensor>& a) {
    return kiln::linear_cross_entropy(a[0], a[1], targets);
  };
  auto plain = [&](const std::vector<Tensor>& a) {
    return kiln::cross_entropy(kiln::matmul(a[0], a[1], false, true), targets);
  };
  compare(state, [&] { return loss_and_grads(fused, {h, w}, Tensor()); },
          [&] { return loss_and_grads(plain, {h, w}, Tensor()); });
}

void grouped(benchmark::State& state, int64_t experts, DType dt, bool backward) {
  const int64_t rows = 4096, k = 2048, n = 768;
  // Uneven routing: the smaller of two uniform draws, summing to rows.
  std::mt19937_64 rng(5);
  std::vector<int64_t> sizes(size_t(experts), 0);
  for (int64_t r = 0; r < rows; ++r)
    ++sizes[std::min(rng() % uint64_t(experts), rng() % uint64_t(experts))];
  Tensor x = randn({rows, k}, dt, 1), w = randn({experts, n, k}, dt, 2, 0.02);
  Tensor gs = kiln::from_vector(sizes, {experts}), dy = randn({rows, n}, DType::f32, 3).to(dt);
  auto fused = [&](const std::vector<Tensor>& a) { return kiln::grouped_matmul(a[0], a[1], gs); };
  // The loop: one matmul per expert on its rows; its backward the same
  // way by hand (dx_e = dy_e w_e, dw_e = dy_e^T x_e), since autograd through
  // the slices would materialise a full-size gradient per expert.
  auto loop = [&](bool with_grads) {
    std::vector<Tensor> y, dx, dw;
    int64_t row = 0;
    for (int64_t e = 0; e < experts; ++e) {
      int64_t s = sizes[size_t(e)];
      Tensor xe = x.slice(0, row, row + s), we = w.select(0, e), ge = dy.slice(0, row, row + s);
      row += s;
      if (s) y.push_back(kiln::matmul(xe, we, false, true));
      if (!with_grads) continue;
      if (s) dx.push_back(kiln::matmul(ge, we));
      dw.push_back((s ? kiln::matmul(ge, xe, true) : kiln::zeros({n, k}, dt)).unsqueeze(0));
    }
    std::vector<Tensor> out{kiln::concat(y, 0)};
    if (with_grads) out.insert(out.end(), {kiln::concat(dx, 0), kiln::concat(dw, 0)});
    return out;
  };
  if (backward)
    compare(state, [&] { return loss_and_grads(fused, {x, w}, dy); }, [&] { return loop(true); });
  else
    compare(state, [&] { return std::vector<Tensor>{fused({x, w})}; }, [&] { return loop(false); });
}

void silu_mul(benchmark::State& state, DType dt, bool backward) {
  Tensor gate = randn({1024, 2048}, dt, 1), up = randn({1024, 2048}, dt, 2),
         cot = randn({1024, 2048}, dt, 3);
  auto fused = [](const std::vector<Tensor>& a) { return kiln::silu_mul(a[0], a[1]); };
  auto plain = [](const std::vector<Tensor>& a) { return kiln::silu(a[0]) * a[1]; };
  if (backward)
    compare(state, [&] { return loss_and_grads(fused, {gate, up}, cot); },
            [&] { return loss_and_grads(plain, {gate, up}, cot); });
  else
    compare(state, [&] { return std::vector<Tensor>{fused({gate, up})}; },
            [&] { return std::vector<Tensor>{plain({gate, up})}; });
}

}  // namespace

int main(int argc, char** argv) {
  for (DType dt : {DType::f32, DType::bf16})
    for (int64_t seq : {512, 2048, 8192})
      for (bool bwd : {false, true})
        benchmark::RegisterBenchmark(("attention/" + std::string(kiln::dtype_name(dt)) +
                                      "/causal/seq" + std::to_string(seq) +
                                      (bwd ? "/fwd+bwd" : "/fwd"))
                                         .c_str(),
                                     attention, AttentionShape{1, 8, 2, 128}, seq, dt, bwd)
            ->Iterations(seq >= 8192 ? 1 : 3)
            ->Unit(benchmark::kMillisecond);
  for (bool bwd : {false, true})
    benchmark::RegisterBenchmark(
        ("attention/bf16/causal/llama3_100m/seq256" + std::string(bwd ? "/fwd+bwd" : "/fwd")).c_str(),
        attention, AttentionShape{4, 12, 4, 64}, 256, DType::bf16, bwd)
        ->Iterations(10)
        ->Unit(benchmark::kMillisecond);
  for (DType dt : {DType::f32, DType::bf16})
    for (int64_t vocab : {128256, 151936})
      benchmark::RegisterBenchmark(("lce/" + std::string(kiln::dtype_name(dt)) + "/vocab" +
                                    std::to_string(vocab) + "/fwd+bwd")
                                       .c_str(),
                                   lce, 4096, 2048, vocab, dt)
          ->Iterations(1)
          ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("lce/bf16/llama3_100m/fwd+bwd", lce, 1024, 768, 16384, DType::bf16)
      ->Iterations(10)
      ->Unit(benchmark::kMillisecond);
  for (DType dt : {DType::f32, DType::bf16})
    for (int64_t experts : {64, 128})
      for (bool bwd : {false, true})
        benchmark::RegisterBenchmark(("grouped/" + std::string(kiln::dtype_name(dt)) + "/experts" +
                                      std::to_string(experts) + (bwd ? "/fwd+bwd" : "/fwd"))
                                         .c_str(),
                                     grouped, experts, dt, bwd)
            ->Iterations(3)
            ->Unit(benchmark::kMillisecond);
  for (DType dt : {DType::f32, DType::bf16})
    for (bool bwd : {false, true})
      benchmark::RegisterBenchmark(("silu_mul/" + std::string(kiln::dtype_name(dt)) +
                                    "/llama3_100m" + (bwd ? "/fwd+bwd" : "/fwd"))
                                       .c_str(),
                                   silu_mul, dt, bwd)
          ->Iterations(20)
          ->Unit(benchmark::kMillisecond);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
