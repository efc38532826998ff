// Loads the x86-64-v4 copy of the kernels where the CPU can run it (isa.h).
// KILN_CPU_BUILD_ISA (what this library was built for) and, where a copy is
// built, KILN_CPU_ISA_COPY_FILE (its file name) come from cmake/CpuIsa.cmake.
#include "kiln/backend/cpu/isa.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "kiln/base/error.h"

namespace kiln::cpu {
namespace {

// A bad KILN_CPU_ISA is found while the libraries load, before any caller
// could catch an error: say what is wrong and stop.
[[noreturn]] void refuse(const std::string& why) {
  std::fprintf(stderr, "kiln: %s\n", why.c_str());
  std::exit(2);
}

#ifdef KILN_CPU_ISA_COPY_FILE
// The copy lies next to this library.
std::string copy_path() {
  Dl_info info;
  if (!dladdr(reinterpret_cast<void*>(&kernel_isa), &info) || !info.dli_fname)
    return KILN_CPU_ISA_COPY_FILE;
  return (std::filesystem::path(info.dli_fname).parent_path() / KILN_CPU_ISA_COPY_FILE).string();
}

std::string load(const std::string& want) {
  const std::string base = KILN_CPU_BUILD_ISA;
  if (want != "auto" && want != "x86-64-v3" && want != "x86-64-v4")
    refuse(cat("KILN_CPU_ISA=", want, ": expected auto, x86-64-v3 or x86-64-v4"));
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("x86-64-v4")) {
    if (want == "x86-64-v4") refuse("KILN_CPU_ISA=x86-64-v4, but this CPU has no AVX-512 (x86-64-v4)");
    return base;
  }
  if (want == "x86-64-v3") return base + "; the AVX-512 copy not loaded: KILN_CPU_ISA=x86-64-v3";
  const std::string path = copy_path();
  if (!dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) {
    const std::string why = cat("cannot load the AVX-512 kernels (", dlerror(), ")");
    if (want == "x86-64-v4") refuse(why);
    std::fprintf(stderr, "kiln: warning: %s; running the %s kernels\n", why.c_str(), base.c_str());
    return base + "; " + why;
  }
  return "x86-64-v4 (AVX-512)";
}
#else
std::string load(const std::string& want) {
  if (want != "auto")
    refuse(cat("KILN_CPU_ISA=", want, ": this build has one kernel variant, ", KILN_CPU_BUILD_ISA,
               "; only auto is valid"));
  return KILN_CPU_BUILD_ISA;
}
#endif

std::string& loaded() {
  static auto* s = new std::string;
  return *s;
}

const bool loading = [] {
  const char* env = std::getenv("KILN_CPU_ISA");
  loaded() = load(env && *env ? env : "auto");
  return true;
}();

}  // namespace

std::string kernel_isa() { return loaded(); }

}  // namespace kiln::cpu
