// The system C++ compiler that builds generated fused kernels, and loading
// the shared objects it makes.
//
// The compiler is $KILN_CXX, else `c++`, run as
//   c++ -std=c++20 -O3 -march=native -fPIC -shared -fopenmp-simd
//       -ffp-contract=off -fno-math-errno -fvisibility=hidden -pipe
// in a private temporary directory (also its TMPDIR), in a process group of
// its own that is stopped if this process exits before the build ends.
// -ffp-contract=off keeps a multiply feeding an add two roundings, as they
// are when separate eager kernels compute them (libkiln is built with it
// too, CMakeLists.txt);
// -fno-math-errno only drops errno writes.
// Parallelism comes from the caller (driver.h), so only `omp simd` is used.
#pragma once
#include <memory>
#include <string>
#include <vector>

namespace kiln::cpu::fused {

struct Toolchain {
  std::string cxx;
  std::vector<std::string> flags;
  std::string version;  // the first line of `cxx --version`
  std::string cpu;      // -march=native code runs only on the same CPU model and features
  // What a built kernel depends on besides its source: part of the cache key.
  std::string identity() const;
};

// Probed once (runs `cxx --version`); throws kiln::Error if it cannot run.
const Toolchain& toolchain();

// Compiles `source` into a shared object and returns its bytes. Throws
// kiln::Error with the compiler's diagnostics on failure.
std::string build_shared_object(const std::string& source);

// True once the process has begun to exit: running compilers are stopped
// and further builds fail (their results could not be used).
bool exiting();

// A loaded shared object; stays loaded while referenced.
class SharedObject {
 public:
  // Loads the shared object whose bytes are `bytes`. Throws kiln::Error.
  static std::shared_ptr<SharedObject> load(const std::string& bytes);
  ~SharedObject();
  // The address of an exported symbol, or nullptr.
  void* symbol(const char* name) const;

 private:
  explicit SharedObject(void* handle) : handle_(handle) {}
  void* handle_;
};

}  // namespace kiln::cpu::fused
