// The MoE layer's only view of parallelism: a token dispatcher brings each
// token's top_k assignments to the rank holding their expert and their
// outputs back (TorchTitan's token dispatcher). The model picks none: a
// layer starts with `local`, and a parallelism plan installs another (as
// it installs tensor-parallel hooks). Everything is built of differentiable
// ops, the exchanges being IR collectives with vjp rules, so every rung of
// the ladder (defer_and_fuse, per-block compile, graph trainer, scan) runs
// it, and no implementation reads a value on the host: shapes are static.
//
//   local       no communication: assignments sorted by expert.
//   all_to_all  experts split over an "ep" mesh axis (rank j holds experts
//               [j E/n, (j+1) E/n)): per-expert token counts exchanged
//               first (all_to_all), then the rows (all_to_all_v: the wire
//               carries only the routed rows, into a receive buffer of the
//               worst case, n x T x top_k rows, whose unused tail is
//               padding), regrouped by local expert; combine reverses it.
//               Drops nothing.
//   capacity    the same exchange with a fixed number of slots per expert:
//               each rank sends each expert at most
//               C = ceil(capacity_factor x T x top_k / E) rows, so every
//               buffer has a static size that does not depend on the
//               routing ([E, C, dim] sent, [E/n, n C, dim] computed).
//               Token-drop policy: an expert keeps the first C assignments
//               in token order (GShard / Switch); a dropped assignment
//               contributes nothing to its token's output (the other
//               weights are not renormalised; the residual carries the
//               token on). Dispatched::dropped counts them. Also valid at
//               ep 1 (static shapes without communication).
#pragma once
#include <memory>
#include <string>

#include "kiln/nn/moe.h"
#include "kiln/ops/collectives.h"

namespace kiln::nn {

// What the experts of this rank get, and what combine needs.
struct Dispatched {
  Tensor x;  // [R, dim]: local expert 0's rows, then 1's, ...; past sum(counts), padding
  Tensor counts;   // [local experts] i64
  Tensor dropped;  // i64 scalar: assignments this rank dropped (capacity; 0 otherwise)
  // Combine's state. The T * top_k assignments in expert order:
  Tensor token;   // [N] i64, the token of each
  Tensor weight;  // [N, 1], its routing weight
  Tensor send_rows, recv_rows;  // all_to_all: [n] i64 rows sent to / received from each rank
  Tensor regroup;               // all_to_all: [R] i64, the received row of each expert-ordered row
  Tensor slot;                  // capacity: [N] i64, each assignment's slot (E * C: dropped)
};

class TokenDispatcher {
 public:
  virtual ~TokenDispatcher() = default;
  // "local", "all_to_all", "capacity 1.25".
  virtual std::string describe() const = 0;
  // How many of a layer's n_experts this rank holds.
  virtual int64_t local_experts(int64_t n_experts) const = 0;
  // x [T, dim] and the router's decisions over all n_experts.
  virtual Dispatched dispatch(const Tensor& x, const Routing& r, int64_t n_experts) const = 0;
  // The experts' outputs y (rows as in d.x) -> [T, dim], each token's
  // weighted sum over its (kept) assignments.
  virtual Tensor combine(const Tensor& y, const Dispatched& d, const Tensor& x) const = 0;
};

std::shared_ptr<const TokenDispatcher> local_dispatcher();
std::shared_ptr<const TokenDispatcher> all_to_all_dispatcher(MeshAxis ep);
// capacity_factor > 0.
std::shared_ptr<const TokenDispatcher> capacity_dispatcher(MeshAxis ep, double capacity_factor);

// The dispatcher named by `kind` ("local", "all_to_all", "capacity") over
// `ep`; "local" needs ep.size 1. Errors name the choices.
std::shared_ptr<const TokenDispatcher> make_dispatcher(const std::string& kind, MeshAxis ep,
                                                       double capacity_factor);

}  // namespace kiln::nn
