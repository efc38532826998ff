#include "kiln/dist/mpi_process_group.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <numeric>

#include "kiln/base/error.h"
#include "kiln/dist/mpi_engine.h"
#include "kiln/dist/reduce.h"

namespace kiln::dist {
namespace {

using mpi::check;
using mpi::Engine;
using mpi::Op;

// 16-bit floats and bools move as raw bits: MPI never does arithmetic here.
MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
    case DType::bf16:
    case DType::f16: return MPI_UINT16_T;
    case DType::i32: return MPI_INT32_T;
    case DType::i64: return MPI_INT64_T;
    case DType::b8: return MPI_UINT8_T;
  }
  return MPI_BYTE;
}

// The bytes a collective reads from `in` and writes to `out` on rank `me`.
std::pair<size_t, size_t> footprint(const Collective& c, int me) {
  const size_t w = itemsize(c.dtype);
  auto sum = [w](const std::vector<int64_t>& v) {
    return size_t(std::accumulate(v.begin(), v.end(), int64_t{0})) * w;
  };
  switch (c.kind) {
    case CollectiveKind::all_reduce:
    case CollectiveKind::reduce: return {size_t(c.count) * w, size_t(c.count) * w};
    case CollectiveKind::all_gather: return {size_t(c.counts[size_t(me)]) * w, sum(c.counts)};
    case CollectiveKind::reduce_scatter: return {sum(c.counts), size_t(c.counts[size_t(me)]) * w};
    case CollectiveKind::all_to_all: return {sum(c.counts), sum(c.recv_counts)};
    case CollectiveKind::broadcast:
    case CollectiveKind::recv: return {0, size_t(c.count) * w};
    case CollectiveKind::send: return {size_t(c.count) * w, 0};
    case CollectiveKind::barrier: return {0, 0};
  }
  return {0, 0};
}

// Exchanges up to this size (handshakes, counts, scalars) run over the
// operation's own copies of their buffers.
constexpr size_t kStagedBytes = 64 << 10;

// Near-equal chunks of `count`, one per rank: the shares of an all_reduce.
std::vector<int64_t> chunks(int64_t count, int n) {
  std::vector<int64_t> c(size_t(n), count / n);
  for (int r = 0; r < count % n; ++r) ++c[size_t(r)];
  return c;
}

class MpiProcessGroup final : public ProcessGroup {
 public:
  MpiProcessGroup(std::shared_ptr<mpi::Comm> comm, std::string name,
                  std::chrono::milliseconds timeout)
      : ProcessGroup(comm->rank, comm->size, std::move(name), comm->world_ranks, timeout),
        comm_(std::move(comm)) {
    comm_->description = describe();
    Engine::get().track(comm_);
  }
  ~MpiProcessGroup() override { Engine::get().release(comm_); }

 protected:
  Work start(Collective c) override;
  std::shared_ptr<ProcessGroup> split_group(int color, int key, std::string name) override;

 private:
  int to_int(const Collective& c, int64_t v) const;
  // MPI's counts and displacements (ints) for per-rank element counts.
  std::vector<int> ints(const Collective& c, std::span<const int64_t> v) const;
  std::vector<int> offsets(const Collective& c, std::span<const int64_t> v) const;
  void add_reduce_scatter(Op& op, const Collective& c, std::span<const int64_t> shares,
                          void* target) const;

  std::shared_ptr<mpi::Comm> comm_;
};

int MpiProcessGroup::to_int(const Collective& c, int64_t v) const {
  KILN_CHECK(v <= INT_MAX, collective_name(c.kind), " on ", describe(), ": ", v,
             " elements exceed MPI's limit of 2^31-1 per call; split the buffer into smaller "
             "calls");
  return int(v);
}

std::vector<int> MpiProcessGroup::ints(const Collective& c, std::span<const int64_t> v) const {
  std::vector<int> out;
  for (int64_t x : v) out.push_back(to_int(c, x));
  return out;
}

std::vector<int> MpiProcessGroup::offsets(const Collective& c, std::span<const int64_t> v) const {
  std::vector<int> out;
  int64_t at = 0;
  for (int64_t x : v) {
    out.push_back(to_int(c, at));
    at += x;
  }
  to_int(c, at);
  return out;
}

// Steps 1-2 of every reduction: rank p's chunk r goes to rank r
// (MPI_Ialltoallv), which then reduces the chunks it got in rank order into
// `target` (shares[rank] elements; null: over the first chunk, in scratch).
// Sets op.arrays[0..3]: shares and their offsets, then what is received.
void MpiProcessGroup::add_reduce_scatter(Op& op, const Collective& c,
                                         std::span<const int64_t> shares, void* target) const {
  int n = size(), me = rank();
  int64_t mine = shares[size_t(me)];
  std::vector<int64_t> received(size_t(n), mine);
  op.arrays = {ints(c, shares), offsets(c, shares), ints(c, received), offsets(c, received)};
  size_t item = itemsize(c.dtype);
  MPI_Datatype t = mpi_type(c.dtype);
  MPI_Comm comm = comm_->data;
  op.steps.push_back({[=](Op& o) {
    o.scratch.resize(size_t(n) * size_t(mine) * item);
    o.requests.resize(1);
    const auto& a = o.arrays;
    check(MPI_Ialltoallv(c.in, a[0].data(), a[1].data(), t, o.scratch.data(), a[2].data(),
                         a[3].data(), t, comm, &o.requests[0]),
          "MPI_Ialltoallv");
  }});
  op.steps.push_back({[=](Op& o) {
    std::vector<const void*> parts;
    for (int p = 0; p < n; ++p) parts.push_back(o.scratch.data() + size_t(p) * size_t(mine) * item);
    reduce_in_order(target ? target : o.scratch.data(), parts, mine, c.dtype, c.op);
  }, false});
}

Work MpiProcessGroup::start(Collective c) {
  if (size() == 1) return run_alone(c);
  auto op = std::make_unique<Op>();
  op->comm = comm_;
  op->kind = c.kind;
  op->timeout = timeout();
  op->timeout_setting = timeout_setting();
  op->deadline = mpi::Clock::now() + op->timeout;
  MPI_Datatype t = mpi_type(c.dtype);
  MPI_Comm comm = comm_->data;
  int me = rank();
  // A small exchange moves through the operation's own buffers, copied
  // back when it completes: a timed-out one is kept (MPI may still write
  // into its buffers), and the caller's may be gone by then. A larger one
  // lends the engine the caller's, to quarantine if it fails.
  void* const caller_out = c.out;
  const auto [in_bytes, out_bytes] = footprint(c, me);
  const bool staged = in_bytes + out_bytes <= kStagedBytes;
  if (staged) {
    op->staged.resize(in_bytes + out_bytes);
    char* in = op->staged.data();
    char* out = in + in_bytes;
    if (c.in && in_bytes) c.in = static_cast<const char*>(std::memcpy(in, c.in, in_bytes));
    if (c.out && out_bytes) c.out = std::memcpy(out, c.out, out_bytes);  // broadcast's root sends it
  } else {
    op->lent = {{c.in, in_bytes}, {c.out, out_bytes}};
  }
  auto issue = [&op](auto&& fn) {
    op->steps.push_back({[fn](Op& o) {
      o.requests.resize(1);
      fn(o, &o.requests[0]);
    }});
  };
  switch (c.kind) {
    case CollectiveKind::all_reduce: {
      std::vector<int64_t> shares = chunks(c.count, size());
      auto* mine = static_cast<char*>(c.out) +
                   std::accumulate(shares.begin(), shares.begin() + me, int64_t(0)) *
                       int64_t(itemsize(c.dtype));
      add_reduce_scatter(*op, c, shares, mine);
      issue([=](Op& o, MPI_Request* r) {
        check(MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, c.out, o.arrays[0].data(),
                              o.arrays[1].data(), t, comm, r),
              "MPI_Iallgatherv");
      });
      break;
    }
    case CollectiveKind::reduce_scatter:
      add_reduce_scatter(*op, c, c.counts, c.out);
      break;
    case CollectiveKind::reduce: {
      std::vector<int64_t> shares = chunks(c.count, size());
      add_reduce_scatter(*op, c, shares, nullptr);
      issue([=](Op& o, MPI_Request* r) {
        check(MPI_Igatherv(o.scratch.data(), o.arrays[0][size_t(me)], t, c.out,
                           o.arrays[0].data(), o.arrays[1].data(), t, c.peer, comm, r),
              "MPI_Igatherv");
      });
      break;
    }
    case CollectiveKind::all_gather:
      op->arrays = {ints(c, c.counts), offsets(c, c.counts)};
      issue([=](Op& o, MPI_Request* r) {
        check(MPI_Iallgatherv(c.in, o.arrays[0][size_t(me)], t, c.out, o.arrays[0].data(),
                              o.arrays[1].data(), t, comm, r),
              "MPI_Iallgatherv");
      });
      break;
    case CollectiveKind::all_to_all:
      op->arrays = {ints(c, c.counts), offsets(c, c.counts), ints(c, c.recv_counts),
                    offsets(c, c.recv_counts)};
      issue([=](Op& o, MPI_Request* r) {
        const auto& a = o.arrays;
        check(MPI_Ialltoallv(c.in, a[0].data(), a[1].data(), t, c.out, a[2].data(), a[3].data(),
                             t, comm, r),
              "MPI_Ialltoallv");
      });
      break;
    case CollectiveKind::broadcast: {
      int n = to_int(c, c.count);
      issue([=](Op&, MPI_Request* r) {
        check(MPI_Ibcast(c.out, n, t, c.peer, comm, r), "MPI_Ibcast");
      });
      break;
    }
    case CollectiveKind::barrier:
      issue([=](Op&, MPI_Request* r) { check(MPI_Ibarrier(comm, r), "MPI_Ibarrier"); });
      break;
    case CollectiveKind::send: {
      int n = to_int(c, c.count);
      issue([=](Op&, MPI_Request* r) {
        check(MPI_Isend(c.in, n, t, c.peer, c.tag, comm, r), "MPI_Isend");
      });
      break;
    }
    case CollectiveKind::recv: {
      int n = to_int(c, c.count);
      issue([=](Op&, MPI_Request* r) {
        check(MPI_Irecv(c.out, n, t, c.peer, c.tag, comm, r), "MPI_Irecv");
      });
      break;
    }
  }
  if (staged && c.out && out_bytes)
    op->steps.push_back({[caller_out, in_bytes, out_bytes](Op& o) {
      std::memcpy(caller_out, o.staged.data() + in_bytes, out_bytes);
    }, false});
  return Engine::get().submit(std::move(op));
}

std::shared_ptr<ProcessGroup> make_group(std::shared_ptr<mpi::Comm> comm, std::string name,
                                         std::chrono::milliseconds timeout) {
  return std::make_shared<MpiProcessGroup>(std::move(comm), std::move(name), timeout);
}

void own_errors(MPI_Comm c) { MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN); }

std::shared_ptr<ProcessGroup> MpiProcessGroup::split_group(int color, int key, std::string name) {
  KILN_CHECK(color >= 0, "splitting ", describe(), " into group '", name, "': color ", color,
             " must be >= 0");
  // Everyone's (color, key) through an ordinary collective first: a member
  // that never splits then times out with a clear error instead of leaving
  // the others blocked in MPI_Comm_split.
  std::vector<int64_t> mine{color, key}, all(2 * size_t(size()));
  try {
    all_gather(mine.data(), all.data(), 2, DType::i64).wait();
  } catch (const Error& e) {
    fail("splitting ", describe(), " into group '", name, "': ", e.what());
  }
  std::vector<int> members;
  for (int r = 0; r < size(); ++r)
    if (all[2 * size_t(r)] == color) members.push_back(r);
  std::stable_sort(members.begin(), members.end(),
                   [&](int a, int b) { return all[2 * size_t(a) + 1] < all[2 * size_t(b) + 1]; });
  auto sub = std::make_shared<mpi::Comm>();
  for (int m : members) sub->world_ranks.push_back(world_ranks()[size_t(m)]);
  Engine::get().call([&] {
    check(MPI_Comm_split(comm_->data, color, key, &sub->data), "MPI_Comm_split");
    check(MPI_Comm_dup(sub->data, &sub->control), "MPI_Comm_dup");
    own_errors(sub->data);
    own_errors(sub->control);
    MPI_Comm_rank(sub->data, &sub->rank);
    MPI_Comm_size(sub->data, &sub->size);
  });
  return make_group(std::move(sub), std::move(name), timeout());
}

}  // namespace

void abort_mpi_job_on_exit() { Engine::get().abort_on_exit(); }

std::shared_ptr<ProcessGroup> mpi_world(std::chrono::milliseconds timeout) {
  Engine& engine = Engine::get();
  auto world = std::make_shared<mpi::Comm>();
  engine.call([&] {
    // Duplicates: kiln's traffic never mixes with other MPI users' in the process.
    check(MPI_Comm_dup(MPI_COMM_WORLD, &world->data), "MPI_Comm_dup");
    check(MPI_Comm_dup(MPI_COMM_WORLD, &world->control), "MPI_Comm_dup");
    own_errors(world->data);
    own_errors(world->control);
  });
  world->rank = engine.world_rank();
  world->size = engine.world_size();
  world->world_ranks.resize(size_t(world->size));
  std::iota(world->world_ranks.begin(), world->world_ranks.end(), 0);
  return make_group(std::move(world), "world", timeout);
}

}  // namespace kiln::dist
