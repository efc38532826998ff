// Scheduling collectives for overlap. A compiled program runs its nodes in
// order on one device queue, and a collective node holds that queue until
// its data has arrived. This pass splits every collective into
//   started = <op>_start(x)            launches it on the communication thread
//   result  = collective_wait(started, x)  blocks until it completes
// and reorders the nodes so that compute runs between the two. The wait's
// result is the started buffer itself (the memory plan aliases them), and it
// reads x so that x stays live and unchanged while the transfer reads it.
//
// The order (deterministic from the graph, so every rank issues the same
// collectives in the same order):
//  - compute nodes keep their relative order, and so do the starts and the
//    waits: collective k starts after k-1 and is waited for after k-1;
//  - a wait is placed as late as possible: just before the first node that
//    reads the collective's result (at the end for a result only returned);
//  - a start is placed as early as possible: once its input is computed (a
//    collective reading another's result, e.g. HSDP's all_reduce of a
//    reduce_scatter, waits for it once it has overlapped at least one
//    compute node), with two bounds:
//      * at most `max_in_flight` collectives are started and not yet waited
//        for: starting collective k first waits for collective
//        k - max_in_flight (which is how a reduce_scatter's full-size input
//        is freed while the backward goes on);
//      * a collective whose result has more elements than its input (a
//        gather, which allocates its full-size output when it starts) starts
//        no earlier than the wait of collective k - prefetch. Under FSDP the
//        parameters' gathers are traced together before the forward; this
//        keeps `prefetch` of them ahead of the compute that reads them
//        rather than unsharding every parameter at program start.
//
// Eager execution, programs compiled without this pass and programs with
// nothing but collectives (skinny collectives, kiln/runtime/spmd.h) run the
// blocking collective kernels.
#pragma once
#include "kiln/ir/graph.h"

namespace kiln::compiler {

struct ScheduleOptions {
  int prefetch = 4;       // >= 1
  int max_in_flight = 8;  // >= prefetch
};

ir::Graph schedule_collectives(const ir::Graph& g, const ScheduleOptions& options = {});

// The op that completes a started collective (its output aliases input 0).
bool is_collective_wait(const ir::OpDef& op);

}  // namespace kiln::compiler
