// By default libgomp's idle threads spin (300000 times: milliseconds)
// after each parallel region before they sleep. Where the cores are busy
// (the device queue's host work, other ranks or programs on the machine)
// those spinning threads take the cores the working ones need: the graph
// trainer on llama3_debug ran several times slower on 2 threads than on 1,
// with most samples in libgomp. Passive threads sleep at once and cost a wake
// per parallel region, which parallel.h's minimum work per thread keeps
// rare. kiln's kernels and oneDNN share libgomp, so both follow the policy.
//
// libgomp reads the policy once, in its own initialiser, before main and
// before any initialiser of ours (a .preinit_array function runs earlier but
// cannot set the environment: glibc resets it afterwards). So main re-executes
// the program with the variable set: the same process, arguments and
// environment, plus the variable, which child processes inherit too. Where
// the program's path cannot be read, libgomp's default stands.
#include "apps/kiln/wait_policy.h"

#include <limits.h>
#include <unistd.h>

#include <cstdlib>

namespace kiln::cli {

void use_passive_openmp(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT")) return;
  // The resolved path, not "/proc/self/exe" itself, so that ps and top
  // still name the process after the program.
  char path[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return;
  path[n] = '\0';
  setenv("OMP_WAIT_POLICY", "passive", 1);
  execv(path, argv);
}

}  // namespace kiln::cli
