// The processes of this run. Started by mpirun (OpenMPI sets
// OMPI_COMM_WORLD_SIZE in every rank's environment), the world is the MPI
// job, and MPI is initialised by the first call to world(). Otherwise the
// world is this process alone and MPI is never touched, so `kiln train`
// needs no launcher.
#pragma once
#include <chrono>
#include <memory>
#include <string>

#include "kiln/dist/process_group.h"

namespace kiln::dist {

// The collective timeout a new world starts with (ProcessGroup::set_timeout).
inline constexpr std::chrono::milliseconds kDefaultTimeout{300'000};

bool launched_by_mpirun();
std::shared_ptr<ProcessGroup> world();
// This rank is ending with an error (kiln's main calls it): when it exits,
// the whole MPI job is aborted, a second later, in which peers that failed
// alike print their own errors. Its peers never wait out a timeout in a
// collective it will not join. Nothing happens without a multi-rank world.
void end_job_on_exit();
// The ranks of this run on this host, which share its cores (mpirun sets
// OMPI_COMM_WORLD_LOCAL_SIZE); 1 without mpirun.
int local_ranks();
// This rank's place among them (OMPI_COMM_WORLD_LOCAL_RANK); 0 without mpirun.
int local_rank();
// The MPI library kiln is linked with, as it names itself (the first line
// of MPI_Get_library_version, which needs no started MPI).
std::string mpi_library();

}  // namespace kiln::dist
