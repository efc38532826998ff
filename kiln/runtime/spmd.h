// Collective safety across ranks. A compiled program that contains a
// collective is only safe when every rank runs the same program: a rank
// whose program differs (rank-dependent code, uneven shapes) can deadlock
// or mix unrelated buffers inside it. So by default collectives are
// "skinny": each runs as a program of its own, a boundary no fused program
// crosses, and every rank agrees on what it waits for:
//   defer_and_fuse      the pending region is flushed at a collective, which
//                       then runs alone (defer.h);
//   compile(fn)         the traced graph is split at its collectives: the
//                       segments between them and each collective run as
//                       programs of their own, in order (segmented_program.h);
//   per-block compile   a region's program never takes in a collective; it
//                       runs through the current context (graph_runner.h).
// Code known to be SPMD (no branch on the rank, the same shapes everywhere)
// is marked with an SpmdSafeGuard: there collectives stay inside the fused
// programs, where later passes can schedule them. Where it is recorded:
// defer_and_fuse reads the scope when the collective is recorded (a pending
// region holding a safe collective stays one program); compile(fn) and
// per-block compile read it when they are called and decide per program
// (CompileOptions::spmd_safe marks one function safe for good). The
// trainer sets it for the step with --compile.spmd_safe, or when the
// ranks verify that they run the same graph (KILN_SPMD_HANDSHAKE).
#pragma once
#include "kiln/ir/graph.h"

namespace kiln {

// Ops that communicate with other ranks (fusion class collective): the
// collectives and the tensor-parallel region exit (an all_reduce).
bool is_collective(const ir::OpDef& op);
bool has_collective(const ir::Graph& g);

// Whether the calling thread is inside an SPMD-safe scope (default: no).
bool spmd_safe();

// Marks the calling thread's code SPMD-safe (or, with false, not) for the
// guard's lifetime; guards nest, the innermost wins.
class SpmdSafeGuard {
 public:
  explicit SpmdSafeGuard(bool safe = true);
  ~SpmdSafeGuard();
  SpmdSafeGuard(const SpmdSafeGuard&) = delete;
  SpmdSafeGuard& operator=(const SpmdSafeGuard&) = delete;

 private:
  bool previous_;
};

}  // namespace kiln
