// Checks, before anything else of kiln runs, that the CPU can run the
// instruction set kiln was built for (cmake/CpuIsa.cmake): without it the
// first AVX2 instruction would kill the process with SIGILL and no word.
#if defined(KILN_CPU_BASELINE_CHECK)
#include <cstdio>
#include <cstdlib>

namespace kiln {
namespace {

// Built for plain x86-64, as it runs before the check has passed.
__attribute__((constructor(101), target("arch=x86-64"))) void check_cpu_baseline() {
  __builtin_cpu_init();
#if defined(__clang__)
  // clang 16 (the fuzz build's compiler) knows features, not levels: the
  // ones of v3's it can test.
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
      __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2"))
    return;
#else
  if (__builtin_cpu_supports("x86-64-v3")) return;
#endif
  std::fputs(
      "kiln: this build needs an x86-64-v3 CPU (AVX2, FMA, BMI2: Intel Haswell, AMD Excavator "
      "or newer), and this one is older; rebuild on it with -DKILN_NATIVE=ON\n",
      stderr);
  std::_Exit(2);
}

}  // namespace
}  // namespace kiln
#endif
