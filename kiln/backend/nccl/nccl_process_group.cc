#include "kiln/backend/nccl/nccl_process_group.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "kiln/backend/cuda/async_error.h"
#include "kiln/backend/cuda/check.h"
#include "kiln/backend/cuda/cuda_graph.h"
#include "kiln/backend/cuda/devices.h"
#include "kiln/backend/cuda/rank_reduce.h"
#include "kiln/backend/cuda/stream.h"
#include "kiln/backend/nccl/library.h"
#include "kiln/base/error.h"
#include "kiln/dist/device_group.h"
#include "kiln/dist/joint_setup.h"

namespace kiln::nccl {
namespace {

using dist::Collective;
using dist::CollectiveKind;
using dist::ProcessGroup;
using dist::Work;
using dist::WorkState;
using Clock = std::chrono::steady_clock;

// Whether p points at device (or managed) memory; null and host memory are not.
bool on_device(const void* p) {
  if (!p) return false;
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();  // an unknown host pointer: not an error to keep
    return false;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

// The public call that makes `c` on group g (which checks it again).
Work run_on(ProcessGroup& g, const Collective& c) {
  switch (c.kind) {
    case CollectiveKind::all_reduce: return g.all_reduce(c.in, c.out, c.count, c.dtype, c.op);
    case CollectiveKind::all_gather: return g.all_gather(c.in, c.out, c.counts, c.dtype);
    case CollectiveKind::reduce_scatter:
      return g.reduce_scatter(c.in, c.out, c.counts, c.dtype, c.op);
    case CollectiveKind::all_to_all:
      return g.all_to_all(c.in, c.counts, c.out, c.recv_counts, c.dtype);
    case CollectiveKind::broadcast: return g.broadcast(c.out, c.count, c.dtype, c.peer);
    case CollectiveKind::reduce: return g.reduce(c.in, c.out, c.count, c.dtype, c.peer, c.op);
    case CollectiveKind::barrier: return g.barrier();
    case CollectiveKind::send: return g.send(c.in, c.count, c.dtype, c.peer, c.tag);
    case CollectiveKind::recv: return g.recv(c.out, c.count, c.dtype, c.peer, c.tag);
  }
  fail("NCCL group: unknown collective");
}

std::vector<int64_t> offsets(const std::vector<int64_t>& counts) {
  std::vector<int64_t> off(counts.size() + 1, 0);
  for (size_t i = 0; i < counts.size(); ++i) off[i + 1] = off[i] + counts[i];
  return off;
}

// A transfer to or from one peer: bytes at p.
struct Transfer {
  int peer;
  void* p;
  size_t bytes;
};

// The NCCL work of one GPU. Every group on it issues its calls under one
// lock and onto one stream, in the order of the calls: NCCL asks that no
// two threads issue on communicators of one device at once, and that the
// operations of a device's communicators run in one order on every rank
// (the order of the program's collectives, the same on every rank), else
// two communicators' kernels may wait on each other across ranks.
struct Lane {
  std::mutex issue;
  cudaStream_t stream = nullptr;
  // Where collectives captured into CUDA graphs are issued: a device
  // captures one graph at a time, and nothing else uses this stream.
  cudaStream_t capture_stream = nullptr;
  cudaEvent_t ready = nullptr;  // joins the caller's stream to the lane's
};

// Device's lane, made on first use; kept for the process's life (the
// groups of a device share it).
Lane& lane_of(int device) {
  // Never destroyed: groups may outlive the statics.
  static auto* mu = new std::mutex;
  static auto* lanes = new std::map<int, Lane>;
  std::lock_guard lock(*mu);
  auto [it, made] = lanes->try_emplace(device);
  Lane& l = it->second;
  if (made) {
    try {
      cuda::DeviceGuard on(device);
      int least = 0, greatest = 0;
      KILN_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
      KILN_CUDA_CHECK(cudaStreamCreateWithPriority(&l.stream, cudaStreamNonBlocking, greatest));
      KILN_CUDA_CHECK(
          cudaStreamCreateWithPriority(&l.capture_stream, cudaStreamNonBlocking, greatest));
      KILN_CUDA_CHECK(cudaEventCreateWithFlags(&l.ready, cudaEventDisableTiming));
    } catch (...) {
      lanes->erase(it);
      throw;
    }
  }
  return l;
}

// The poller's own host group beside `host`: its exchange on a timeout
// never meets the host traffic of other threads. Made before the
// communicator, so a group never fails to be made once every member has it.
std::shared_ptr<ProcessGroup> watch_group(ProcessGroup& host) {
  return host.split(0, host.rank(), host.name() + "/nccl-watch");
}

// A CUDA event, destroyed with its last holder (a Work's device wait may
// still be ordering a stream on it after its collective completed).
struct Event {
  cudaEvent_t e = nullptr;
  Event() { KILN_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming)); }
  ~Event() { (void)cudaEventDestroy(e); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
};

// A collective in flight: watched from before its NCCL calls (which may
// block, waiting for peers) and done when its event has passed.
struct Pending {
  std::shared_ptr<WorkState> state = std::make_shared<WorkState>();
  Clock::time_point deadline;
  std::string what;  // "all_reduce of 4096 bf16 elements"
  // Its number among this group's collectives, from 1; 0 for a send or a
  // receive, which only its two ranks make.
  int64_t seq = 0;
  // A send's or receive's peer (world rank); for a replayed graph whose
  // calls on the group are all sends and receives, each of their peers.
  std::vector<int> peers;
  std::shared_ptr<Event> done;  // null for a captured one: done once issued
  bool captured = false;        // issued into a CUDA graph being captured
  std::atomic<bool> issued{false};  // done is recorded after the calls
};

// The collectives one CUDA graph captured on one group: watched as one at
// each replay.
struct CapturedBatch {
  int64_t count = 0;        // every captured call
  int64_t collectives = 0;  // of them, those every rank makes (not sends or receives)
  std::vector<int> peers;   // the sends' and receives' peers (world ranks)
  std::string first;        // the first one's description
};

bool point_to_point(CollectiveKind k) {
  return k == CollectiveKind::send || k == CollectiveKind::recv;
}

class NcclProcessGroup final : public ProcessGroup,
                               public std::enable_shared_from_this<NcclProcessGroup> {
 public:
  // `watch` is the poller's own host group (watch_group), `comm` the
  // communicator over `host`'s members; the device's lane exists already.
  NcclProcessGroup(std::shared_ptr<ProcessGroup> host, std::shared_ptr<ProcessGroup> watch,
                   int device, ncclComm_t comm)
      : ProcessGroup(host->rank(), host->size(), host->name(), host->world_ranks(),
                     host->timeout()),
        host_(std::move(host)), watch_(std::move(watch)), device_(device), comm_(comm),
        lane_(lane_of(device)) {
    poller_ = std::thread([this] { poll(); });
  }

  // The group over `comm`, made once every member has it: a member that
  // cannot make its part aborts the communicator (its peers' collectives on
  // it then fail by their timeout, naming it).
  static std::shared_ptr<NcclProcessGroup> make(std::shared_ptr<ProcessGroup> host,
                                                std::shared_ptr<ProcessGroup> watch, int device,
                                                ncclComm_t comm) {
    try {
      return std::make_shared<NcclProcessGroup>(std::move(host), std::move(watch), device, comm);
    } catch (...) {
      library().comm_abort(comm);
      throw;
    }
  }

  // Returns once this rank's collectives on the group are done (the poller
  // watches them to their end or their timeout). The graphs holding its
  // collectives go first: none is launched on a group being destroyed.
  ~NcclProcessGroup() override {
    drop_graphs();
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    poller_.join();
    drop_graphs();  // any captured meanwhile
    if (std::lock_guard lock(abort_mu_); aborted_.empty()) library().comm_destroy(comm_);
  }

  DeviceKind memory() const override { return DeviceKind::cuda; }

 protected:
  // A failed split aborts this group's communicator on every rank (one
  // still inside ncclCommSplit returns, and the ranks stay in step).
  std::shared_ptr<ProcessGroup> split_group(int color, int key, std::string name) override {
    std::shared_ptr<ProcessGroup> host = host_->split(color, key, name);
    std::shared_ptr<ProcessGroup> watch = watch_group(*host);
    auto comm = std::make_shared<ncclComm_t>(nullptr);
    {
      std::lock_guard lock(lane_.issue);
      try {
        dist::joint_setup(
            *host_, cat("ncclCommSplit of ", describe(), " into ", name),
            [self = shared_from_this(), comm, color, key] {
              cuda::DeviceGuard on(self->device_);
              // NCCL splits a communicator with none of its operations
              // outstanding (a stuck one is failed, and the communicator
              // aborted, by the poller).
              KILN_CUDA_CHECK(cudaStreamSynchronize(self->lane_.stream));
              self->check_usable("split");
              check(library().comm_split(self->comm_, color, key, comm.get(), nullptr),
                    "ncclCommSplit");
            },
            [comm] { library().comm_abort(*comm); });
      } catch (const Error& e) {
        abort(e.what());
        throw;
      }
    }
    std::shared_ptr<NcclProcessGroup> g = make(std::move(host), std::move(watch), device_, *comm);
    g->set_timeout(timeout());
    return g;
  }

  Work start(Collective c) override {
    // A barrier synchronises the hosts. Another call with no buffers
    // (nothing to move on this rank) runs on NCCL, as its peers' calls with
    // device buffers do.
    if (c.kind == CollectiveKind::barrier) return run_on(*host_, c);
    const bool in_host = c.in && !on_device(c.in), out_host = c.out && !on_device(c.out);
    if (in_host || out_host) {
      KILN_CHECK((in_host || !c.in) && (out_host || !c.out), collective_name(c.kind), " on ",
                 describe(), ": one buffer is in device memory and the other in host memory; "
                 "NCCL moves device memory only");
      return run_on(*host_, c);
    }
    std::lock_guard lock(lane_.issue);
    check_usable(collective_name(c.kind));
    cuda::DeviceGuard on(device_);
    if (unsigned long long graph = capture_id()) return start_captured(c, graph);
    std::shared_ptr<Pending> p = watch_issue(c, /*captured=*/false);
    issue(*p, [&] {
      // Called on the device's queue thread: after the work enqueued there.
      if (cuda::bound_to(device_)) {
        KILN_CUDA_CHECK(cudaEventRecord(lane_.ready, cuda::current_stream()));
        KILN_CUDA_CHECK(cudaStreamWaitEvent(lane_.stream, lane_.ready, 0));
      }
      enqueue(c, lane_.stream);
      KILN_CUDA_CHECK(cudaEventRecord(p->done->e, lane_.stream));
    });
    // A wait on the queue thread orders the device's later work after the
    // collective and returns.
    p->state->set_device_wait(
        [device = device_, done = p->done] {
          if (!cuda::bound_to(device)) return false;
          KILN_CUDA_CHECK(cudaStreamWaitEvent(cuda::current_stream(), done->e, 0));
          return true;
        },
        [device = device_](const std::string& why) { cuda::report_async_error(device, why); });
    p->issued = true;
    return Work(p->state);
  }

 private:
  bool aborted() {
    std::lock_guard lock(abort_mu_);
    return !aborted_.empty();
  }

  // A collective about to be issued, watched by the poller from now: NCCL's
  // calls may block, waiting for peers (NCCL connects to them at the first
  // collective between them, also under a capture). A captured one is done
  // once issued, nothing running now.
  std::shared_ptr<Pending> watch_issue(const Collective& c, bool captured) {
    auto p = std::make_shared<Pending>();
    p->deadline = Clock::now() + timeout();
    p->what = captured ? cat(describe_call(c), " (captured into a CUDA graph)") : describe_call(c);
    p->captured = captured;
    if (point_to_point(c.kind))
      p->peers = {world_ranks()[size_t(c.peer)]};
    else if (!captured)
      p->seq = ++started_;
    if (!captured) p->done = std::make_shared<Event>();
    {
      std::lock_guard lock(mu_);
      pending_.push_back(p);
    }
    cv_.notify_all();
    return p;
  }

  // Runs `calls`, p's NCCL calls. One that fails may have issued part of
  // them: the ranks are out of step, and NCCL asks for an abort after a
  // failed call.
  template <class F>
  void issue(const Pending& p, F&& calls) {
    try {
      calls();
    } catch (const std::exception& e) {
      abort(cat(p.what, " on ", describe(), " could not be issued: ", e.what()));
      throw;
    }
  }

  // Raises where the communicator was aborted: `what` cannot run on it.
  void check_usable(const std::string& what) {
    std::lock_guard lock(abort_mu_);
    KILN_CHECK(aborted_.empty(), what, " on ", describe(),
               ": the group's NCCL communicator was aborted after an earlier failure (", aborted_,
               ")");
  }

  // The id of the CUDA graph the calling thread is capturing on this
  // group's device (it is that device's queue thread); 0 when none.
  unsigned long long capture_id() const {
    if (!cuda::bound_to(device_)) return 0;
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    unsigned long long id = 0;
    KILN_CUDA_CHECK(cudaStreamGetCaptureInfo(cuda::current_stream(), &status, &id));
    return status == cudaStreamCaptureStatusNone ? 0 : id;
  }

  // `c` inside the CUDA graph being captured (`graph`): its calls go into
  // the graph on the capture stream, forked from the device's stream and
  // joined back by the wait, and run at each replay. Nothing runs now: the
  // poller watches only the issue (NCCL may connect to peers in it), and
  // each replay, the graph's collectives on this group as one
  // (watch_replay). The graph
  // holds the group (NCCL keeps the communicator until the graph goes), so
  // the group drops it before it destroys or aborts the communicator.
  Work start_captured(const Collective& c, unsigned long long graph) {
    if (graph != batch_graph_ || !batch_) {
      auto batch = std::make_shared<CapturedBatch>();
      std::weak_ptr<NcclProcessGroup> group = weak_from_this();
      // The graph, once watch_replays returns it.
      auto graph_cell = std::make_shared<std::weak_ptr<cuda::GraphInstance>>();
      std::weak_ptr<cuda::GraphInstance> held = cuda::watch_replays(
          {[group, graph_cell] {
             if (std::shared_ptr<NcclProcessGroup> g = group.lock())
               g->check_usable("a replay of a CUDA graph holding its collectives");
             else  // being destroyed: the graph goes, and is captured anew
               cuda::drop_graph(*graph_cell);
           },
           [group, batch] {
             if (std::shared_ptr<NcclProcessGroup> g = group.lock()) g->watch_replay(*batch);
           }});
      *graph_cell = held;
      batch_graph_ = graph;
      batch_ = std::move(batch);
      std::lock_guard lock(mu_);
      std::erase_if(graphs_,
                    [](const std::weak_ptr<cuda::GraphInstance>& g) { return g.expired(); });
      graphs_.push_back(std::move(held));
    }
    if (batch_->count++ == 0) batch_->first = describe_call(c);
    if (point_to_point(c.kind))
      batch_->peers.push_back(world_ranks()[size_t(c.peer)]);
    else
      ++batch_->collectives;
    auto done = std::make_shared<Event>();
    std::shared_ptr<Pending> p = watch_issue(c, /*captured=*/true);
    issue(*p, [&] {
      KILN_CUDA_CHECK(cudaEventRecord(lane_.ready, cuda::current_stream()));
      KILN_CUDA_CHECK(cudaStreamWaitEvent(lane_.capture_stream, lane_.ready, 0));
      enqueue(c, lane_.capture_stream);
      KILN_CUDA_CHECK(cudaEventRecord(done->e, lane_.capture_stream));
    });
    p->issued = true;
    auto state = std::make_shared<WorkState>();
    state->set_device_wait(
        [done] {
          KILN_CUDA_CHECK(cudaStreamWaitEvent(cuda::current_stream(), done->e, 0));
          return true;
        },
        [device = device_](const std::string& why) { cuda::report_async_error(device, why); });
    state->finish_captured();
    return Work(state);
  }

  // Watches a replay of a graph holding `b`: like one collective issued
  // now, done when the device's stream has passed the graph. A failure or
  // timeout aborts the communicator (so the graph's NCCL kernels return)
  // and is raised at the device's next synchronisation.
  void watch_replay(const CapturedBatch& b) {
    if (aborted()) return;  // the replay fails at the device's synchronisation
    auto p = std::make_shared<Pending>();
    p->deadline = Clock::now() + timeout();
    p->what = b.count == 1
                  ? cat(b.first, " (in a replayed CUDA graph)")
                  : cat("the ", b.count, " collectives of a replayed CUDA graph (the first: ",
                        b.first, ")");
    if (b.collectives)
      p->seq = started_ += b.collectives;
    else
      p->peers = b.peers;  // only they and this rank replay them
    p->done = std::make_shared<Event>();
    KILN_CUDA_CHECK(cudaEventRecord(p->done->e, cuda::current_stream()));
    p->state->set_device_wait(
        [] { return true; },  // the stream runs the graph's collectives in order already
        [device = device_](const std::string& why) { cuda::report_async_error(device, why); });
    p->state->wait_on_device();  // a failure goes to the device's next synchronisation
    p->issued = true;
    {
      std::lock_guard lock(mu_);
      pending_.push_back(p);
    }
    cv_.notify_all();
  }

  static std::string describe_call(const Collective& c) {
    int64_t n = c.count;
    for (int64_t x : c.counts) n = std::max(n, x);
    return cat(collective_name(c.kind), " of ", n, " ", dtype_name(c.dtype), " elements");
  }

  // Grouped sends and receives on stream s.
  void exchange(const std::vector<Transfer>& sends, const std::vector<Transfer>& recvs,
                cudaStream_t s) {
    const Library& l = library();
    // The poller aborts the communicator to end a call blocked on missing
    // peers; nothing is issued on it after that.
    check_usable("an exchange of chunks");
    check(l.group_start(), "ncclGroupStart");
    // The group ends however its calls go: a thread left inside one would
    // defer every later NCCL call it makes.
    struct End {
      const Library& l;
      bool done = false;
      ~End() {
        if (!done) (void)l.group_end();
      }
    } end{l};
    for (const Transfer& t : sends)
      if (t.bytes) check(l.send(t.p, t.bytes, ncclUint8, t.peer, comm_, s), "ncclSend");
    for (const Transfer& t : recvs)
      if (t.bytes) check(l.recv(t.p, t.bytes, ncclUint8, t.peer, comm_, s), "ncclRecv");
    end.done = true;
    check(l.group_end(), "ncclGroupEnd");
  }

  static void copy(void* dst, const void* src, size_t bytes, cudaStream_t s) {
    if (bytes && dst != src)
      KILN_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
  }

  // Stream-ordered (inside a graph: the graph's own allocation).
  static char* staging(size_t bytes, cudaStream_t s) {
    void* p = nullptr;
    KILN_CUDA_CHECK(cudaMallocAsync(&p, std::max<size_t>(bytes, 1), s));
    return static_cast<char*>(p);
  }
  static void release(char* p, cudaStream_t s) { KILN_CUDA_CHECK(cudaFreeAsync(p, s)); }

  // in (offsets by counts) reduced over ranks into out (counts[rank] elements):
  // each rank's chunks exchanged, then reduced in rank order.
  void reduce_scatter(const char* in, char* out, const std::vector<int64_t>& counts, DType dtype,
                      ReduceOp op, cudaStream_t s) {
    const size_t w = itemsize(dtype);
    const int n = size(), me = rank();
    const std::vector<int64_t> off = offsets(counts);
    const int64_t mine = counts[size_t(me)];
    char* parts = staging(size_t(n * mine) * w, s);
    std::vector<Transfer> sends, recvs;
    for (int p = 0; p < n; ++p) {
      if (p == me) continue;
      sends.push_back({p, const_cast<char*>(in) + size_t(off[size_t(p)]) * w,
                       size_t(counts[size_t(p)]) * w});
      recvs.push_back({p, parts + size_t(p * mine) * w, size_t(mine) * w});
    }
    copy(parts + size_t(me * mine) * w, in + size_t(off[size_t(me)]) * w, size_t(mine) * w, s);
    exchange(sends, recvs, s);
    cuda::rank_ordered_reduce(out, parts, n, mine, mine, dtype, op, s);
    release(parts, s);
  }

  // Every rank's `counts[rank]` elements at mine, into out at its offset.
  void all_gather(const char* mine, char* out, const std::vector<int64_t>& counts, DType dtype,
                  cudaStream_t s) {
    const size_t w = itemsize(dtype);
    const int n = size(), me = rank();
    const std::vector<int64_t> off = offsets(counts);
    std::vector<Transfer> sends, recvs;
    for (int p = 0; p < n; ++p) {
      if (p == me) continue;
      sends.push_back({p, const_cast<char*>(mine), size_t(counts[size_t(me)]) * w});
      recvs.push_back({p, out + size_t(off[size_t(p)]) * w, size_t(counts[size_t(p)]) * w});
    }
    copy(out + size_t(off[size_t(me)]) * w, mine, size_t(counts[size_t(me)]) * w, s);
    exchange(sends, recvs, s);
  }

  // c's calls on stream s.
  void enqueue(const Collective& c, cudaStream_t s) {
    const size_t w = itemsize(c.dtype);
    const int n = size(), me = rank();
    const char* in = static_cast<const char*>(c.in);
    char* out = static_cast<char*>(c.out);
    switch (c.kind) {
      case CollectiveKind::all_reduce: {
        // A reduce-scatter of near-equal chunks, then their all-gather.
        std::vector<int64_t> chunks(size_t(n), c.count / n);
        for (int64_t r = 0; r < c.count % n; ++r) chunks[size_t(r)] += 1;
        const int64_t at = offsets(chunks)[size_t(me)];
        reduce_scatter(in, out + size_t(at) * w, chunks, c.dtype, c.op, s);
        all_gather(out + size_t(at) * w, out, chunks, c.dtype, s);
        return;
      }
      case CollectiveKind::reduce_scatter:
        return reduce_scatter(in, out, c.counts, c.dtype, c.op, s);
      case CollectiveKind::all_gather: return all_gather(in, out, c.counts, c.dtype, s);
      case CollectiveKind::all_to_all: {
        const std::vector<int64_t> so = offsets(c.counts), ro = offsets(c.recv_counts);
        std::vector<Transfer> sends, recvs;
        for (int p = 0; p < n; ++p) {
          if (p == me) continue;
          sends.push_back({p, const_cast<char*>(in) + size_t(so[size_t(p)]) * w,
                           size_t(c.counts[size_t(p)]) * w});
          recvs.push_back({p, out + size_t(ro[size_t(p)]) * w, size_t(c.recv_counts[size_t(p)]) * w});
        }
        copy(out + size_t(ro[size_t(me)]) * w, in + size_t(so[size_t(me)]) * w,
             size_t(c.counts[size_t(me)]) * w, s);
        return exchange(sends, recvs, s);
      }
      case CollectiveKind::broadcast:
        if (n > 1 && c.count > 0)
          check(library().broadcast(out, out, size_t(c.count) * w, ncclUint8, c.peer, comm_, s),
                "ncclBroadcast");
        return;
      case CollectiveKind::reduce: {
        // Every rank's input to the root, reduced there in rank order.
        const size_t bytes = size_t(c.count) * w;
        if (me != c.peer) return exchange({{c.peer, const_cast<char*>(in), bytes}}, {}, s);
        char* parts = staging(bytes * size_t(n), s);
        std::vector<Transfer> recvs;
        for (int p = 0; p < n; ++p)
          if (p != me) recvs.push_back({p, parts + bytes * size_t(p), bytes});
        copy(parts + bytes * size_t(me), in, bytes, s);
        exchange({}, recvs, s);
        cuda::rank_ordered_reduce(out, parts, n, c.count, c.count, c.dtype, c.op, s);
        return release(parts, s);
      }
      case CollectiveKind::barrier: fail("NCCL group: barriers run on the host group");
      case CollectiveKind::send:
        return exchange({{c.peer, const_cast<char*>(in), size_t(c.count) * w}}, {}, s);
      case CollectiveKind::recv: return exchange({}, {{c.peer, out, size_t(c.count) * w}}, s);
    }
  }

  // Completes the pending collectives in order; fails them on NCCL's
  // errors and on the timeout.
  void poll() {
    (void)cudaSetDevice(device_);  // this thread's own: nothing to restore
    std::unique_lock lock(mu_);
    while (true) {
      cv_.wait(lock, [&] { return stop_ || abort_requested_ || !pending_.empty(); });
      if (abort_requested_) {
        abort_requested_ = false;
        lock.unlock();
        abort_communicator();
        lock.lock();
        continue;
      }
      if (pending_.empty()) return;  // stopping
      std::shared_ptr<Pending> p = pending_.front();
      lock.unlock();
      std::string error;
      {
        std::lock_guard alock(abort_mu_);
        if (!aborted_.empty()) error = cat(p->what, " on ", describe(), " failed: ", aborted_);
      }
      const cudaError_t q = !error.empty() || !p->issued ? cudaErrorNotReady
                            : p->done                    ? cudaEventQuery(p->done->e)
                                                         : cudaSuccess;
      ncclResult_t async = ncclSuccess;
      if (!error.empty() || q == cudaSuccess) {
      } else if (q != cudaErrorNotReady) {
        error = cat(p->what, " on ", describe(), " failed on the device: ", cudaGetErrorString(q));
      } else if (async_error(async)) {
        error = cat(p->what, " on ", describe(), " failed: NCCL reported ",
                    library().get_error_string(async));
      } else if (Clock::now() > p->deadline) {
        error = timeout_message(*p);
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(20));
        lock.lock();
        continue;
      }
      if (!error.empty()) {
        abort(error, p);
        lock.lock();
        continue;
      }
      lock.lock();
      if (pending_.empty() || pending_.front() != p) continue;  // failed by an abort meanwhile
      p->state->finish();
      pending_.pop_front();
    }
  }

  // The collective that timed out, and which ranks had not started it: each
  // rank's count of started collectives, exchanged over the watch group. A
  // send or receive is between two ranks only: its peer is named.
  std::string timeout_message(const Pending& p) {
    std::string head = cat(p.what, " on ", describe(), " did not complete within ",
                           timeout().count(), " ms");
    if (!p.peers.empty()) {
      std::vector<int> peers = p.peers;
      std::sort(peers.begin(), peers.end());
      peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
      std::string list;
      for (int r : peers) list += cat(list.empty() ? "" : ", ", r);
      return cat(head, peers.size() == 1 ? "; its peer, world rank " : "; its peers, world ranks ",
                 list, peers.size() == 1 ? ", did not make the matching call" :
                                           ", did not all make the matching calls",
                 ", or the link failed");
    }
    if (p.captured)
      return cat(head, ": NCCL connects a rank to its peers at their first collective, also "
                       "under a capture, and some did not answer (did every rank capture the "
                       "same program?)");
    head += cat(" (collective #", p.seq, " of this group)");
    std::vector<int64_t> counts(static_cast<size_t>(size()));
    int64_t mine = started_;
    try {
      watch_->set_timeout(timeout());
      watch_->all_gather(&mine, counts.data(), 1, DType::i64).wait();
    } catch (const Error& e) {
      return cat(head, "; asking the ranks how far they got failed: ", e.what());
    }
    std::string behind;
    for (int r = 0; r < size(); ++r)
      if (counts[size_t(r)] < p.seq)
        behind += cat(behind.empty() ? "" : ", ", world_ranks()[size_t(r)], " (at #",
                      counts[size_t(r)], ")");
    return behind.empty()
               ? cat(head, "; every rank started it, so NCCL stalled (a network or GPU fault?)")
               : cat(head, "; world ranks ", behind, " did not arrive (if they are only slow, "
                     "raise the timeout: ", timeout_setting(), ")");
  }

  // Fails every pending collective (`first` with `why` itself, the others
  // as following it) and has the poller abort the communicator: nothing is
  // issued on it from now, and a thread blocked in a NCCL call on it
  // returns. The abort waits for the graphs holding the group's collectives
  // to go, so it never runs on a thread that issues (which may hold the
  // lane, or be capturing such a graph).
  void abort(const std::string& why, const std::shared_ptr<Pending>& first = nullptr) {
    {
      std::lock_guard lock(abort_mu_);
      if (!aborted_.empty()) return fail_pending(why, first);
      aborted_ = why;
    }
    fail_pending(why, first);
    {
      std::lock_guard lock(mu_);
      abort_requested_ = true;
    }
    cv_.notify_all();
  }

  // The poller's part of an abort: the graphs go first (NCCL waits for
  // them), then the communicator.
  void abort_communicator() {
    drop_graphs();
    std::lock_guard lock(comm_mu_);
    library().comm_abort(comm_);
  }

  // Whether NCCL reports an asynchronous error (in `async`) on the
  // communicator, which abort() may be freeing.
  bool async_error(ncclResult_t& async) {
    std::lock_guard lock(comm_mu_);
    return !aborted() && library().comm_get_async_error(comm_, &async) == ncclSuccess &&
           async != ncclSuccess && async != ncclInProgress;
  }

  void fail_pending(const std::string& why, const std::shared_ptr<Pending>& first) {
    std::lock_guard lock(mu_);
    for (const std::shared_ptr<Pending>& left : pending_)
      left->state->fail(left == first ? why
                                      : cat(left->what, " on ", describe(),
                                            " failed: an earlier collective did (", why, ")"));
    pending_.clear();
  }

  // Frees the CUDA graphs that hold this group's collectives: NCCL waits
  // for them to go before it destroys or aborts the communicator. Each is
  // captured anew at its next replay, on the groups of its time.
  void drop_graphs() {
    std::vector<std::weak_ptr<cuda::GraphInstance>> graphs;
    {
      std::lock_guard lock(mu_);
      graphs.swap(graphs_);
    }
    for (const std::weak_ptr<cuda::GraphInstance>& g : graphs) cuda::drop_graph(g);
  }

  std::shared_ptr<ProcessGroup> host_, watch_;
  int device_;
  ncclComm_t comm_;
  Lane& lane_;
  // The graph being captured (its id) and its collectives on this group.
  unsigned long long batch_graph_ = 0;
  std::shared_ptr<CapturedBatch> batch_;
  std::mutex comm_mu_;  // the poller's queries against the abort
  std::mutex abort_mu_;
  std::string aborted_;  // why the communicator was aborted; empty while usable
  std::atomic<int64_t> started_{0};  // collectives every rank makes
  std::mutex mu_;  // the pending list and the graphs
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Pending>> pending_;
  std::vector<std::weak_ptr<cuda::GraphInstance>> graphs_;  // holding this group's collectives
  bool stop_ = false;
  bool abort_requested_ = false;  // abort() asks the poller to abort the communicator
  std::thread poller_;
};

}  // namespace

std::shared_ptr<ProcessGroup> nccl_group(std::shared_ptr<ProcessGroup> host, int device) {
  // Every rank checks its device first and learns whether all others can
  // go on, so none is left waiting in NCCL's bootstrap.
  std::string problem;
  try {
    // A non-blocking communicator returns from calls before their work is
    // issued, which this group's stream order and events do not follow.
    const char* blocking = std::getenv("NCCL_COMM_BLOCKING");
    KILN_CHECK(!blocking || std::string(blocking) != "0",
               "NCCL_COMM_BLOCKING=0 makes NCCL's communicators non-blocking, and kiln's NCCL "
               "groups issue on blocking ones: unset it");
    library();
    cuda::DeviceGuard on(device);
    KILN_CUDA_CHECK(cudaFree(nullptr));  // creates the context
    lane_of(device);
  } catch (const Error& e) {
    problem = cat("cuda:", device, ": ", e.what());
  }
  dist::agree_on(*host, "Checking each rank's GPU for NCCL", problem);

  // Rank 0's unique id, once every rank knows it was made.
  ncclUniqueId id{};
  problem.clear();
  if (host->rank() == 0) {
    try {
      check(library().get_unique_id(&id), "ncclGetUniqueId");
    } catch (const Error& e) {
      problem = e.what();
    }
  }
  dist::agree_on(*host, "Making NCCL's unique id", problem);
  host->broadcast(&id, int64_t(sizeof id), DType::b8, 0).wait();
  std::shared_ptr<ProcessGroup> watch = watch_group(*host);

  // NCCL's bootstrap has no timeout of its own: a peer lost during it
  // would hold the others there for ever.
  auto comm = std::make_shared<ncclComm_t>(nullptr);
  const int n = host->size(), rank = host->rank();
  dist::joint_setup(
      *host, "ncclCommInitRank",
      [comm, n, id, rank, device] {
        cuda::DeviceGuard on(device);  // NCCL's device
        check(library().comm_init_rank(comm.get(), n, id, rank), "ncclCommInitRank");
      },
      [comm] { library().comm_abort(*comm); });
  return NcclProcessGroup::make(std::move(host), std::move(watch), device, *comm);
}

namespace {
[[maybe_unused]] const bool registered =
    (dist::register_device_group(
         DeviceKind::cuda,
         [](std::shared_ptr<ProcessGroup> host, int index) {
           return nccl_group(std::move(host), index);
         },
         []() -> std::string {
           try {
             return library().version;
           } catch (const Error& e) {
             return cat("none: ", e.what());
           }
         }),
     true);
}  // namespace

}  // namespace kiln::nccl
