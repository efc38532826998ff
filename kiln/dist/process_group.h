// A process group: the ranks that communicate together (the whole job, or
// one dimension of a device mesh) and the collectives they run, on raw
// buffers of any kiln dtype. Every call checks its arguments at once,
// returns a Work handle, and moves the data on a communication thread.
//
// Buffers must stay valid, and inputs unchanged, until the Work completes.
// One that fails may leave the transport holding them (MPI cannot cancel an
// exchange a late peer may still join): the MPI group copies exchanges of
// up to 64 KiB, and quarantines larger ones' buffers (runtime/allocator.h:
// a tensor's memory is then never used again nor given back to its owner).
// Every member must make the same calls in the same order with matching
// sizes (counts[] agree on every rank); a member that does not arrive makes
// the others' Work fail after the group's timeout, naming the collective,
// the group and the ranks that did not arrive.
//
// Reductions are deterministic and equal to one process's loop: element i
// is x_0[i] op x_1[i] op ... op x_{n-1}[i] in group-rank order, computed in
// f32 for bf16/f16 (rounded once, to nearest even), f64 for f64, wrapping
// for integers; avg divides the sum by the group size.
//
// Backends: MpiProcessGroup (CPU ranks), LocalProcessGroup (a world of
// one) and, for GPUs, NCCL's (kiln/backend/nccl/nccl_process_group.h, made
// through kiln/dist/device_group.h).
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kiln/base/dtype.h"
#include "kiln/base/reduce_op.h"
#include "kiln/dist/work.h"
#include "kiln/runtime/device.h"

namespace kiln::dist {

using kiln::ReduceOp;

enum class CollectiveKind : uint8_t {
  all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, reduce, barrier, send, recv
};
const char* collective_name(CollectiveKind kind);

// One call as the caller made it (checked): what a backend runs. Counts are
// in elements.
struct Collective {
  CollectiveKind kind = CollectiveKind::barrier;
  DType dtype = DType::f32;
  const void* in = nullptr;
  void* out = nullptr;  // broadcast: the buffer, in place
  int64_t count = 0;    // all_reduce, broadcast, reduce, send, recv
  // all_gather: each rank's contribution; reduce_scatter: each rank's share;
  // all_to_all: what this rank sends to each rank.
  std::vector<int64_t> counts;
  std::vector<int64_t> recv_counts;  // all_to_all: what this rank receives from each rank
  ReduceOp op = ReduceOp::sum;
  int peer = 0;  // broadcast/reduce: the root; send/recv: the other rank
  int tag = 0;   // send/recv
};

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& name() const { return name_; }
  // The members' ranks in the whole job, by group rank.
  const std::vector<int>& world_ranks() const { return world_ranks_; }
  // "group 'tp' (world ranks 2,3)": for messages.
  std::string describe() const;

  // How long a collective may take, from the call to completion, before its
  // Work fails. Groups split from this one start with its timeout.
  std::chrono::milliseconds timeout() const { return std::chrono::milliseconds(timeout_ms_); }
  void set_timeout(std::chrono::milliseconds t);
  // What sets the timeout, named by a timeout's message for whoever needs a
  // longer one ("--comm.timeout_seconds" unless set here; inherited by
  // splits). Set it before the group's first collective.
  const std::string& timeout_setting() const { return timeout_setting_; }
  void set_timeout(std::chrono::milliseconds t, std::string setting);

  // out = op over ranks of in (`count` elements); in may equal out.
  Work all_reduce(const void* in, void* out, int64_t count, DType dtype,
                  ReduceOp op = ReduceOp::sum);
  // out = every rank's in, concatenated in rank order; rank r gives counts[r]
  // elements (the even form: `count` each).
  Work all_gather(const void* in, void* out, std::span<const int64_t> counts, DType dtype);
  Work all_gather(const void* in, void* out, int64_t count, DType dtype);
  // in (sum(counts) elements) is reduced over ranks; rank r keeps the
  // counts[r] elements at offset counts[0] + ... + counts[r-1].
  Work reduce_scatter(const void* in, void* out, std::span<const int64_t> counts, DType dtype,
                      ReduceOp op = ReduceOp::sum);
  Work reduce_scatter(const void* in, void* out, int64_t count, DType dtype,
                      ReduceOp op = ReduceOp::sum);
  // Sends send_counts[j] consecutive elements of in to rank j; out receives
  // recv_counts[p] elements from rank p, in rank order.
  Work all_to_all(const void* in, std::span<const int64_t> send_counts, void* out,
                  std::span<const int64_t> recv_counts, DType dtype);
  // Every rank's data becomes root's.
  Work broadcast(void* data, int64_t count, DType dtype, int root);
  // Root's out = op over ranks of in; other ranks' out is not written.
  Work reduce(const void* in, void* out, int64_t count, DType dtype, int root,
              ReduceOp op = ReduceOp::sum);
  Work barrier();
  // Point to point; a send matches the peer's recv with the same tag.
  Work send(const void* data, int64_t count, DType dtype, int peer, int tag = 0);
  Work recv(void* data, int64_t count, DType dtype, int peer, int tag = 0);

  // A collective over this group: members passing the same color form a new
  // group, ranked by key (ties by rank here). Every member must call it.
  std::shared_ptr<ProcessGroup> split(int color, int key, std::string name);

  // The devices whose memory the collectives move (host memory for MPI and
  // local groups; NCCL's take CUDA memory, and hand host buffers to their
  // host group).
  virtual DeviceKind memory() const { return DeviceKind::cpu; }

 protected:
  ProcessGroup(int rank, int size, std::string name, std::vector<int> world_ranks,
               std::chrono::milliseconds timeout);
  // Runs a checked call. Calls from several threads are each run whole, but
  // their order is the caller's to keep the same on every rank.
  virtual Work start(Collective c) = 0;
  // split's group, with this group's timeout.
  virtual std::shared_ptr<ProcessGroup> split_group(int color, int key, std::string name) = 0;

 private:
  void check_counts(const char* op, std::span<const int64_t> counts) const;
  void check_rank(const char* op, const char* what, int r) const;

  int rank_, size_;
  std::string name_;
  std::vector<int> world_ranks_;
  std::atomic<int64_t> timeout_ms_;
  std::string timeout_setting_ = "--comm.timeout_seconds";
};

// What a group of one computes: copies of the input (any reduction of one
// value is that value). Backends need no communication for it.
Work run_alone(const Collective& c);

// Every member's `mine` (of any length), by group rank: a collective over g.
std::vector<std::string> all_gather_text(ProcessGroup& g, const std::string& mine);
// "world rank 0: a; world ranks 1, 3: b": one text per member of g (by group
// rank), the members grouped by text in order of their first; empty texts
// are left out.
std::string world_ranks_by_text(const ProcessGroup& g, const std::vector<std::string>& texts);

}  // namespace kiln::dist
