// Whether another process still runs: how a leftover temporary file or
// folder named by its writer's pid is told from one a live writer uses.
#pragma once
#include <signal.h>
#include <sys/types.h>

#include <cerrno>

namespace kiln {

// Process `pid` exists (another user's included: kill then fails with EPERM).
inline bool process_alive(pid_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

}  // namespace kiln
