// The MPI backend of ProcessGroup, for CPU ranks started by mpirun
// (OpenMPI). MPI moves the bytes (non-blocking collectives and
// point-to-point calls, polled by one communication thread: mpi_engine.h);
// the arithmetic of reductions is kiln's own (reduce.h), so results are
// bit-identical to a single process summing in rank order, whatever
// algorithm MPI picks for the sizes and the number of ranks.
//
// Reductions are a reduce-scatter (MPI_Ialltoallv of each rank's chunk,
// then a local rank-ordered reduction) followed, for all_reduce, by an
// MPI_Iallgatherv: the same traffic as a ring all-reduce.
#pragma once
#include <chrono>
#include <memory>

#include "kiln/dist/process_group.h"

namespace kiln::dist {

// The whole MPI job as the group "world". The first call initialises MPI.
std::shared_ptr<ProcessGroup> mpi_world(std::chrono::milliseconds timeout);
// Ends the MPI job with MPI_Abort at exit (world.h end_job_on_exit).
void abort_mpi_job_on_exit();

}  // namespace kiln::dist
