// Background threads that build backends' generated kernels (the CPU's
// shared objects while its interpreter runs, CUDA's cubins while the host
// goes on). Jobs run in submission order; the threads are detached and the
// pool is never destroyed, so a build still running at exit does not hold
// the process up unless it asks to wait (wait_for_compile_jobs).
#pragma once
#include <functional>

namespace kiln {

// Queues `job`; it must not throw. Pool size: KILN_FUSED_COMPILE_THREADS,
// default a quarter of the hardware threads, from 1 to 4.
void submit_compile_job(std::function<void()> job);

// Jobs queued or running now.
int pending_compile_jobs();
// Blocks until no job is queued or running: how a process that ends (the
// trainer, after its last step) keeps the builds it started, which store
// their results in the compile cache for the next run.
void wait_for_compile_jobs();

}  // namespace kiln
