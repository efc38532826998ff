// By default libgomp's idle threads spin 300000 times (milliseconds) after
// each parallel region before they sleep. Where the cores are busy (the
// device queue's host work, other ranks or programs on the machine) those
// spinning threads take the cores the working ones need; sleeping at once
// (OMP_WAIT_POLICY=passive) pays a wake-up per parallel region instead. A
// short spin keeps most of both: measured on 2 cores, graph trainer,
// llama3_debug bf16, tokens/s, two rounds each:
//                          quiet machine   2 busy processes beside it
//   default spin           61.0k  50.7k    12.5k  15.3k
//   GOMP_SPINCOUNT=10000   53.4k  50.4k    22.2k  18.5k
//   passive                33.4k  38.6k    14.0k  16.9k
// kiln's kernels and oneDNN share libgomp, so both follow the setting.
//
// libgomp reads it once, in its own initialiser, before main and before any
// initialiser of ours (a .preinit_array function runs earlier but cannot set
// the environment: glibc resets it afterwards). So main re-executes the
// program with the variable set: the same process, arguments and
// environment, plus the variable, which child processes inherit too. Where
// the program's path cannot be read, libgomp's default stands.
#include "apps/kiln/wait_policy.h"

#include <limits.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace kiln::cli {

void bound_openmp_spinning(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT")) return;
  // The resolved path, not "/proc/self/exe" itself, so that ps and top
  // still name the process after the program.
  char path[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return;
  path[n] = '\0';
  setenv("GOMP_SPINCOUNT", std::to_string(kSpinCount).c_str(), 1);
  execv(path, argv);
}

}  // namespace kiln::cli
