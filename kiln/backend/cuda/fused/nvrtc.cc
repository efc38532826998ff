#include "kiln/backend/cuda/fused/nvrtc.h"

#include <nvrtc.h>

#include "kiln/base/error.h"

namespace kiln::cuda::fused {
namespace {

void check(nvrtcResult r, const char* call) {
  KILN_CHECK(r == NVRTC_SUCCESS, "NVRTC: ", call, " failed: ", nvrtcGetErrorString(r));
}

// Destroys the program however compile_cubin leaves.
struct Program {
  nvrtcProgram p = nullptr;
  ~Program() {
    if (p) nvrtcDestroyProgram(&p);
  }
};

}  // namespace

std::string nvrtc_version() {
  int major = 0, minor = 0;
  check(nvrtcVersion(&major, &minor), "nvrtcVersion");
  return cat(major, ".", minor);
}

std::vector<std::string> nvrtc_options(int arch) {
  return {cat("--gpu-architecture=sm_", arch), "--fmad=false", "--prec-div=true", "--prec-sqrt=true",
          "--ftz=false", "-std=c++17"};
}

std::string compile_cubin(const std::string& source, const std::string& name, int arch) {
  Program prog;
  check(nvrtcCreateProgram(&prog.p, source.c_str(), name.c_str(), 0, nullptr, nullptr),
        "nvrtcCreateProgram");
  const std::vector<std::string> options = nvrtc_options(arch);
  std::vector<const char*> argv;
  for (const std::string& o : options) argv.push_back(o.c_str());
  const nvrtcResult r = nvrtcCompileProgram(prog.p, int(argv.size()), argv.data());
  if (r != NVRTC_SUCCESS) {
    size_t size = 0;
    std::string log;
    if (nvrtcGetProgramLogSize(prog.p, &size) == NVRTC_SUCCESS && size > 1) {
      log.resize(size);
      nvrtcGetProgramLog(prog.p, log.data());
      log.resize(size - 1);
    }
    if (log.size() > 4000) log = log.substr(0, 4000) + "\n...";
    fail("NVRTC failed (", nvrtcGetErrorString(r), ") to compile generated CUDA code '", name,
         "' for sm_", arch, ":\n", log);
  }
  size_t size = 0;
  check(nvrtcGetCUBINSize(prog.p, &size), "nvrtcGetCUBINSize");
  std::string cubin(size, '\0');
  check(nvrtcGetCUBIN(prog.p, cubin.data()), "nvrtcGetCUBIN");
  return cubin;
}

}  // namespace kiln::cuda::fused
