#include "kiln/backend/cuda/fused/nvrtc.h"

#include <nvrtc.h>

#include <condition_variable>
#include <cstdlib>
#include <mutex>

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

std::string compile(const std::string& source, const std::string& name, int arch) {
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

// NVRTC registers the teardown of its state at exit during its first
// compile, and a compile still running (on the compile pool, say) after that
// teardown crashes. So the first compile here is a trivial one, and only then
// is exit told to wait for the compiles in flight: exit handlers run in
// reverse order, this one before NVRTC's. Compiles asked for after exit
// began fail instead of starting.
class InFlight {
 public:
  static InFlight& get() {
    static InFlight* in_flight = new InFlight;  // never destroyed: used during exit
    return *in_flight;
  }
  void begin(const std::string& name, int arch) {
    std::call_once(warmed_up_, [&] {
      try {
        compile("extern \"C\" __global__ void kiln_warm_up() {}", "kiln_warm_up.cu", arch);
      } catch (const Error&) {
        // The real compile raises what is wrong.
      }
      std::atexit([] { get().wait_at_exit(); });
    });
    std::lock_guard lock(mu_);
    KILN_CHECK(!exiting_, "NVRTC: the process is exiting; '", name, "' is not compiled");
    ++running_;
  }
  void end() {
    std::lock_guard lock(mu_);
    --running_;
    done_.notify_all();
  }

 private:
  void wait_at_exit() {
    std::unique_lock lock(mu_);
    exiting_ = true;
    done_.wait(lock, [&] { return running_ == 0; });
  }
  std::once_flag warmed_up_;
  std::mutex mu_;
  std::condition_variable done_;
  int running_ = 0;
  bool exiting_ = false;
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
  InFlight::get().begin(name, arch);
  struct End {
    ~End() { InFlight::get().end(); }
  } end;
  return compile(source, name, arch);
}

}  // namespace kiln::cuda::fused
