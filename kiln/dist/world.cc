#include "kiln/dist/world.h"

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

std::shared_ptr<ProcessGroup> world() {
  static std::mutex mu;
  static std::shared_ptr<ProcessGroup> w;
  std::lock_guard lock(mu);
  if (!w)
    w = launched_by_mpirun() ? mpi_world(kDefaultTimeout)
                             : std::make_shared<LocalProcessGroup>("world", kDefaultTimeout);
  return w;
}

}  // namespace kiln::dist
