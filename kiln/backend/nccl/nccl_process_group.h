// The NCCL backend of kiln::dist::ProcessGroup, for ranks on GPUs, with
// the MPI group's interface and semantics (kiln/dist/process_group.h):
//
// - Made collectively over a host group (the MPI world, or one of its
//   splits) and a CUDA device per rank: rank 0's NCCL unique id travels by
//   the host group's broadcast, and every rank first checks its device, so a
//   rank without one fails them all with a message naming it (no rank is
//   left in NCCL's bootstrap).
// - Device buffers move over NCCL on a stream beside the compute (high
//   priority), so collectives overlap the compute that does not need them;
//   the groups of one GPU share that stream and issue in the order of the
//   calls, as NCCL asks of several communicators on one device. Called on
//   the device's queue thread (kiln's CUDA kernels are), a collective
//   follows the work enqueued there before it; called from another thread,
//   its buffers must be ready (synchronise the device first). Host buffers
//   go to the host group, so host code may use either, and so do barriers
//   (they synchronise the hosts); another call with no buffers (nothing to
//   move on this rank) runs on NCCL, as its peers' calls with device
//   buffers do.
// - Reductions keep the interface's bits: a reduce-scatter is an exchange of
//   chunks (grouped ncclSend/ncclRecv) and a rank-ordered reduction on the
//   GPU (kiln/backend/cuda/rank_reduce.h), an all-reduce that plus an
//   all-gather (the traffic of a ring all-reduce), never NCCL's own
//   arithmetic, whose order depends on the topology.
// - A polling thread completes each Work when its event has passed, fails
//   it on NCCL's asynchronous errors, and on the group's timeout aborts the
//   communicator and names the collective, the group and the ranks that did
//   not arrive (found by an exchange of collective counts over the host
//   group, whose own timeout names ranks that never answer; a send's or
//   receive's peer is named). A call that fails part-issued aborts it too.
//   The poller makes the abort itself, never a thread that issues (NCCL's
//   abort waits for the graphs holding the communicator, which one may be
//   capturing).
// - Collectives captured into CUDA graphs run at each replay, which the
//   poller watches as one collective (and their issue under the capture,
//   where NCCL may wait to connect to peers). NCCL keeps a communicator
//   until the graphs holding it are gone, so the group drops those graphs
//   before it is destroyed or aborted; each is captured anew at its next
//   replay.
// - split() splits the host group and the communicator (ncclCommSplit),
//   once the group's collectives issued so far are done.
// - NCCL_COMM_BLOCKING=0 (non-blocking communicators) is refused.
#pragma once
#include <memory>

#include "kiln/dist/process_group.h"

namespace kiln::nccl {

// Collective over `host`'s members: each passes its own CUDA device index.
std::shared_ptr<dist::ProcessGroup> nccl_group(std::shared_ptr<dist::ProcessGroup> host,
                                               int device);

}  // namespace kiln::nccl
