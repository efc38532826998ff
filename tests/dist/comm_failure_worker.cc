// An MPI job in which one rank misbehaves, for comm_failure_test:
//   comm_failure_worker skip|kill|stop|different|late MARK|checkpoint
// Every rank first runs one all_reduce together (#1 on the world); then for
// the second, rank 0 skips it (and sleeps), or rank 1 dies, or rank 0 stops
// dead (SIGSTOP: alive to mpirun, silent to its peers), or rank 0 calls a
// barrier instead. A rank whose collective fails prints the error and exits
// non-zero, as the kiln CLI does.
//
// late MARK (2 ranks): rank 1 joins an all_gather of tensor memory (too
// large for the engine's own copies) after rank 0's timed out, and once it
// completes (its data sent into rank 0's buffer) creates the file MARK.
// Rank 0 frees the buffers of the failed exchange, takes a buffer of the
// same size from the allocator, and reports whether rank 1's late data was
// written into it. (Rank 0 never reads where the late data lands: that
// would race with MPI writing it.)
//
// checkpoint (2 ranks): a checkpoint group (train/distributed_checkpoint.h)
// of 10 s waits for rank 1, 2.5 s late to a barrier, where the world's 1 s
// would not; then, its timeout lowered to 1 s, rank 1 skips a barrier, and
// rank 0's error names the setting that raises the checkpoint group's.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "kiln/base/error.h"
#include "kiln/dist/world.h"
#include "kiln/runtime/backend.h"
#include "kiln/train/distributed_checkpoint.h"

namespace {

using namespace std::chrono_literals;
constexpr int64_t kLateCount = 1 << 18;  // 1 MiB of f32 from each rank

// Rank 0's side of `late`: returns the process's exit status.
int gather_then_reuse(kiln::dist::ProcessGroup& w, const std::string& mark) {
  const size_t bytes = 2 * kLateCount * sizeof(float);
  {
    kiln::Storage mine(kiln::kCPU, bytes / 2), all(kiln::kCPU, bytes);
    try {
      w.all_gather(mine.data, all.data, kLateCount, kiln::DType::f32).wait();
      std::fprintf(stderr, "rank 0: the all_gather did not time out\n");
      return 1;
    } catch (const kiln::Error& e) {
      std::fprintf(stderr, "rank 0: timed out as it should: %s\n", e.what());
    }
  }  // the caller's buffers are gone, as after any error
  kiln::Storage reused(kiln::kCPU, bytes);
  auto* f = static_cast<float*>(reused.data);
  std::fill_n(f, 2 * kLateCount, 0.0f);
  bool completed = false;
  for (int i = 0; i < 200 && !completed; ++i) {
    std::this_thread::sleep_for(100ms);
    completed = std::filesystem::exists(mark);
  }
  std::this_thread::sleep_for(500ms);  // for this rank's MPI to take in what rank 1 sent
  bool written = std::any_of(f, f + 2 * kLateCount, [](float x) { return x != 0.0f; });
  std::fprintf(stderr, "rank 0: rank 1's late all_gather %s; %s\n",
               completed ? "completed" : "never completed",
               written ? "its data was written into reused memory" : "reused memory was left alone");
  return written ? 3 : 1;
}

}  // namespace

int main(int argc, char** argv) {
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
    if (scenario == "late") {
      const std::string mark = argc > 2 ? argv[2] : "";
      if (w->rank() == 0) return gather_then_reuse(*w, mark);
      std::this_thread::sleep_for(3s);  // past rank 0's 1 s timeout and 1 s diagnosis
      std::vector<float> mine(kLateCount, 7.0f), all(2 * kLateCount);
      w->set_timeout(10s);
      w->all_gather(mine.data(), all.data(), kLateCount, kiln::DType::f32).wait();
      std::ofstream{mark};
      return 0;
    }
    if (scenario == "checkpoint") {
      auto g = kiln::train::checkpoint_group(*w, 10s);
      if (w->rank() == 1) std::this_thread::sleep_for(2500ms);
      g->barrier().wait();
      std::fprintf(stderr, "rank %d: the checkpoint group waited for the late rank\n", w->rank());
      g->set_timeout(1s);
      if (w->rank() == 1) std::this_thread::sleep_for(300s);
      g->barrier().wait();
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
