// An MPI job in which one rank misbehaves, for comm_failure_test:
//   comm_failure_worker skip|kill|stop|different
// Every rank first runs one all_reduce together (#1 on the world); then for
// the second, rank 0 skips it (and sleeps), or rank 1 dies, or rank 0 stops
// dead (SIGSTOP: alive to mpirun, silent to its peers), or rank 0 calls a
// barrier instead. A rank whose collective fails prints the error and exits
// non-zero, as the kiln CLI does.
#include <csignal>
#include <cstdio>
#include <string>
#include <thread>

#include "kiln/base/error.h"
#include "kiln/dist/world.h"

int main(int argc, char** argv) {
  using namespace std::chrono_literals;
  std::string scenario = argc > 1 ? argv[1] : "";
  try {
    auto w = kiln::dist::world();
    w->set_timeout(60s);  // ranks may start far apart on a loaded machine
    float x = 1, y = 0;
    w->all_reduce(&x, &y, 1, kiln::DType::f32).wait();
    w->set_timeout(1s);
    if (scenario == "skip" && w->rank() == 0) {
      std::this_thread::sleep_for(300s);  // busy elsewhere: the others must not wait this long
      return 0;
    }
    if (scenario == "kill" && w->rank() == 1) std::raise(SIGKILL);
    if (scenario == "stop" && w->rank() == 0) std::raise(SIGSTOP);
    if (scenario == "different" && w->rank() == 0)
      w->barrier().wait();
    else
      w->all_reduce(&x, &y, 1, kiln::DType::f32).wait();
    return 0;
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
