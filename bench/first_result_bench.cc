// Time to first result of a compiled block (forward + backward): the first
// call in this process (cold, or warm from the persistent L3 cache when an
// earlier process filled it) and the second call (L1-warm).
// bench/first_result.sh runs it with a cold and then a warm cache directory.
#include <chrono>
#include <cstdio>

#include "bench/block.h"
#include "kiln/runtime/compile.h"
#include "kiln/runtime/compile_cache.h"

using namespace kiln;

int main() {
  bench::BlockShape shape{.batch = 2, .seq = 64, .dim = 128, .heads = 4, .ffn = 344};
  std::vector<Tensor> inputs = bench::block_inputs(shape);
  synchronize();
  auto time_call = [&](CompiledFunction& f) {
    auto t0 = std::chrono::steady_clock::now();
    std::vector<Tensor> out = f(inputs);
    out[0].item<float>();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  };
  CompiledFunction f = compile([&](const std::vector<Tensor>& a) { return bench::block_step(a, shape); });
  double first = time_call(f);
  double second = time_call(f);
  CacheStats s = CompileCache::instance().stats();
  std::printf("first_call_ms %.2f\nsecond_call_ms %.2f\nl3_hits %lld\nl3_misses %lld\ncompile_s %.3f\n",
              first, second, (long long)s.l3.hits, (long long)s.l3.misses, s.l3.compile_seconds);
}
