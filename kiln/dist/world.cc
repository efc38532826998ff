#include "kiln/dist/world.h"

#include <sys/prctl.h>

#include <csignal>
#include <cstdlib>
#include <mutex>

#include "kiln/dist/local_process_group.h"
#include "kiln/dist/mpi_process_group.h"

namespace kiln::dist {

bool launched_by_mpirun() { return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr; }

int local_ranks() {
  const char* n = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  return n && std::atoi(n) > 0 ? std::atoi(n) : 1;
}

int local_rank() {
  const char* r = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  return r && std::atoi(r) > 0 ? std::atoi(r) : 0;
}

namespace {

std::mutex world_mu;
std::shared_ptr<ProcessGroup> the_world;

// A rank dies with its launcher (mpirun SIGKILLed, a node's daemon gone)
// rather than running on as an orphan: OpenMPI puts each rank in a process
// group of its own, so a kill of the job's group would leave the ranks
// writing checkpoints and metrics into a folder the next job then shares.
void die_with_launcher() { ::prctl(PR_SET_PDEATHSIG, SIGKILL); }

}  // namespace

std::shared_ptr<ProcessGroup> world() {
  std::lock_guard lock(world_mu);
  if (!the_world && launched_by_mpirun()) {
    die_with_launcher();
    the_world = mpi_world(kDefaultTimeout);
  } else if (!the_world) {
    the_world = std::make_shared<LocalProcessGroup>("world", kDefaultTimeout);
  }
  return the_world;
}

void end_job_on_exit() {
  std::lock_guard lock(world_mu);
  // A rank failing before it joined the world leaves nobody waiting on it.
  if (the_world && launched_by_mpirun() && the_world->size() > 1) abort_mpi_job_on_exit();
}

}  // namespace kiln::dist
