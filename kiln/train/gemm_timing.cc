#include "kiln/train/gemm_timing.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>

#include "kiln/base/error.h"
#include "kiln/ops/matmul.h"
#include "kiln/ops/random.h"
#include "kiln/runtime/context.h"
#include "kiln/runtime/tensor.h"
#include "kiln/runtime/threads.h"

namespace kiln::train {
namespace {

double process_cpu_seconds() {
  timespec t;
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

struct Batch {
  double wall = 0, cpu = 0;  // seconds
};

// `calls` products, from the first enqueue to the final sync.
Batch run(const Tensor& a, const Tensor& b, const GemmSpec& s, int calls) {
  auto start = std::chrono::steady_clock::now();
  double cpu0 = process_cpu_seconds();
  for (int i = 0; i < calls; ++i) matmul(a, b, s.ta, s.tb);
  synchronize(s.device);
  return {std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
          process_cpu_seconds() - cpu0};
}

// Restores kiln's thread count when the measurement ends, however it ends.
struct ThreadsScope {
  int saved = num_threads();
  explicit ThreadsScope(int n) { set_num_threads(n); }
  ~ThreadsScope() { set_num_threads(saved); }
};

}  // namespace

std::string describe(const GemmSpec& s) {
  return cat(s.m, "x", s.n, "x", s.k, " ", dtype_name(s.dtype), " ", s.ta ? "T" : "N",
             s.tb ? "T" : "N");
}

GemmTiming time_gemm(const GemmSpec& s) {
  KILN_CHECK(s.m > 0 && s.n > 0 && s.k > 0, "bench gemm: M, N and K must be positive, got ",
             describe(s));
  KILN_CHECK(s.threads >= 1 && s.iters >= 0 && s.batches >= 1 && s.batch_seconds > 0,
             "bench gemm: need threads >= 1, iters >= 0, batches >= 1 and batch_seconds > 0");
  ThreadsScope threads(s.threads);
  // Each call a kernel of its own (a deferring mode would drop the unused products).
  EagerModeGuard strict(EagerMode::strict);
  const Shape as = s.ta ? Shape{s.k, s.m} : Shape{s.m, s.k}, bs = s.tb ? Shape{s.n, s.k} : Shape{s.k, s.n};
  Tensor a, b;
  if (s.device.kind == DeviceKind::cpu) {
    // Small values keep every product finite; a CPU's GEMM speed does not depend on them.
    a = full(as, 0.01, s.dtype, s.device);
    b = full(bs, 0.01, s.dtype, s.device);
  } else {
    // A GPU's does: constant inputs draw less power, and run at clocks a
    // model's products do not reach.
    Generator g(1);
    a = uniform(as, -1, 1, g, s.dtype, s.device);
    b = uniform(bs, -1, 1, g, s.dtype, s.device);
  }

  run(a, b, s, 1);  // creates and caches the primitive
  double warm = run(a, b, s, 2).wall / 2;
  GemmTiming t;
  t.iters = s.iters > 0 ? s.iters : std::clamp(int(std::ceil(s.batch_seconds / warm)), 1, 10000);
  t.batches = s.batches;
  t.seconds = t.busy_seconds = INFINITY;
  Batch total;
  for (int i = 0; i < s.batches; ++i) {
    Batch r = run(a, b, s, t.iters);
    t.seconds = std::min(t.seconds, r.wall / t.iters);
    t.busy_seconds = std::min(t.busy_seconds, std::min(r.wall, r.cpu / s.threads) / t.iters);
    total.wall += r.wall, total.cpu += r.cpu;
  }
  const double gflop = 2.0 * double(s.m) * double(s.n) * double(s.k) / 1e9;
  t.gflops = gflop / t.seconds;
  t.busy_gflops = gflop / t.busy_seconds;
  t.cpu_share = total.cpu / (s.threads * total.wall);
  return t;
}

}  // namespace kiln::train
