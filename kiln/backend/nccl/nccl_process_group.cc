#include "kiln/backend/nccl/nccl_process_group.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "kiln/backend/cuda/async_error.h"
#include "kiln/backend/cuda/check.h"
#include "kiln/backend/cuda/cuda_graph.h"
#include "kiln/backend/cuda/rank_reduce.h"
#include "kiln/backend/cuda/stream.h"
#include "kiln/backend/nccl/library.h"
#include "kiln/base/error.h"
#include "kiln/dist/device_group.h"

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

// A collective in flight: watched from before its NCCL calls (which may
// block, waiting for peers) and done when its event has passed.
struct Pending {
  std::shared_ptr<WorkState> state = std::make_shared<WorkState>();
  Clock::time_point deadline;
  std::string what;  // "all_reduce of 4096 bf16 elements"
  int64_t seq = 0;   // its number among this group's collectives, from 1
  cudaEvent_t done = nullptr;
  std::atomic<bool> issued{false};  // done is recorded after the calls
};

// The collectives one CUDA graph captured on one group: watched as one at
// each replay.
struct CapturedBatch {
  int64_t count = 0;
  std::string first;  // the first one's description
};

class NcclProcessGroup final : public ProcessGroup,
                               public std::enable_shared_from_this<NcclProcessGroup> {
 public:
  NcclProcessGroup(std::shared_ptr<ProcessGroup> host, int device, ncclComm_t comm)
      : ProcessGroup(host->rank(), host->size(), host->name(), host->world_ranks(),
                     host->timeout()),
        host_(std::move(host)), device_(device), comm_(comm) {
    // The poller's own host group: its exchange on a timeout never meets
    // the host traffic of other threads.
    watch_ = host_->split(0, host_->rank(), name() + "/nccl-watch");
    KILN_CUDA_CHECK(cudaSetDevice(device_));
    int least = 0, greatest = 0;
    KILN_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    KILN_CUDA_CHECK(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, greatest));
    KILN_CUDA_CHECK(
        cudaStreamCreateWithPriority(&capture_stream_, cudaStreamNonBlocking, greatest));
    KILN_CUDA_CHECK(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
    poller_ = std::thread([this] { poll(); });
  }

  ~NcclProcessGroup() override {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    poller_.join();
    cudaSetDevice(device_);
    if (std::lock_guard lock(abort_mu_); aborted_.empty()) library().comm_destroy(comm_);
    cudaEventDestroy(ready_);
    for (cudaEvent_t e : captured_events_) cudaEventDestroy(e);
    cudaStreamDestroy(capture_stream_);
    cudaStreamDestroy(stream_);
  }

  DeviceKind memory() const override { return DeviceKind::cuda; }

  std::shared_ptr<ProcessGroup> split(int color, int key, std::string name) override {
    std::shared_ptr<ProcessGroup> host = host_->split(color, key, name);
    ncclComm_t comm = nullptr;
    {
      std::lock_guard lock(issue_mu_);
      KILN_CUDA_CHECK(cudaSetDevice(device_));
      check(library().comm_split(comm_, color, key, &comm, nullptr), "ncclCommSplit");
    }
    auto g = std::make_shared<NcclProcessGroup>(std::move(host), device_, comm);
    g->set_timeout(timeout());
    return g;
  }

 protected:
  Work start(Collective c) override {
    const bool in_device = on_device(c.in), out_device = on_device(c.out);
    if (!in_device && !out_device) return run_on(*host_, c);
    KILN_CHECK((in_device || !c.in) && (out_device || !c.out), collective_name(c.kind), " on ",
               describe(), ": one buffer is in device memory and the other in host memory; "
               "NCCL moves device memory only");
    std::lock_guard lock(issue_mu_);
    check_usable(collective_name(c.kind));
    KILN_CUDA_CHECK(cudaSetDevice(device_));
    if (unsigned long long graph = capture_id()) return start_captured(c, graph);
    auto p = std::make_shared<Pending>();
    p->deadline = Clock::now() + timeout();
    p->what = describe_call(c);
    p->seq = ++started_;
    KILN_CUDA_CHECK(cudaEventCreateWithFlags(&p->done, cudaEventDisableTiming));
    {
      std::lock_guard plock(mu_);
      pending_.push_back(p);
    }
    cv_.notify_all();
    // Called on the device's queue thread: after the work enqueued there.
    if (cuda::bound_to(device_)) {
      KILN_CUDA_CHECK(cudaEventRecord(ready_, cuda::current_stream()));
      KILN_CUDA_CHECK(cudaStreamWaitEvent(stream_, ready_, 0));
    }
    enqueue(c, stream_);
    KILN_CUDA_CHECK(cudaEventRecord(p->done, stream_));
    // A wait on the queue thread orders the device's later work after the
    // collective and returns. The poller completes the state (and only
    // then destroys the event), never while an enqueue is under way.
    p->state->set_device_wait(
        [device = device_, done = p->done] {
          if (!cuda::bound_to(device)) return false;
          KILN_CUDA_CHECK(cudaStreamWaitEvent(cuda::current_stream(), done, 0));
          return true;
        },
        [device = device_](const std::string& why) { cuda::report_async_error(device, why); });
    p->issued = true;
    return Work(p->state);
  }

 private:
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
  // joined back by the wait, and run at each replay. Nothing runs now, so
  // the host has nothing to watch; each replay is watched instead, the
  // graph's collectives on this group as one (watch_replay).
  Work start_captured(const Collective& c, unsigned long long graph) {
    if (graph != batch_graph_ || !batch_) {
      batch_graph_ = graph;
      batch_ = std::make_shared<CapturedBatch>();
      std::weak_ptr<NcclProcessGroup> group = weak_from_this();
      cuda::watch_replays({[group] {
                             if (std::shared_ptr<NcclProcessGroup> g = group.lock())
                               g->check_usable("a replay of a CUDA graph holding its collectives");
                           },
                           [group, batch = batch_] {
                             if (std::shared_ptr<NcclProcessGroup> g = group.lock())
                               g->watch_replay(*batch);
                           }});
    }
    if (batch_->count++ == 0) batch_->first = describe_call(c);
    cudaEvent_t done = nullptr;
    KILN_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    captured_events_.push_back(done);  // kept: the graph was captured through it
    KILN_CUDA_CHECK(cudaEventRecord(ready_, cuda::current_stream()));
    KILN_CUDA_CHECK(cudaStreamWaitEvent(capture_stream_, ready_, 0));
    enqueue(c, capture_stream_);
    KILN_CUDA_CHECK(cudaEventRecord(done, capture_stream_));
    auto state = std::make_shared<WorkState>();
    state->set_device_wait(
        [done] {
          KILN_CUDA_CHECK(cudaStreamWaitEvent(cuda::current_stream(), done, 0));
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
    auto p = std::make_shared<Pending>();
    p->deadline = Clock::now() + timeout();
    p->what = b.count == 1
                  ? cat(b.first, " (in a replayed CUDA graph)")
                  : cat("the ", b.count, " collectives of a replayed CUDA graph (the first: ",
                        b.first, ")");
    p->seq = started_ += b.count;
    KILN_CUDA_CHECK(cudaEventCreateWithFlags(&p->done, cudaEventDisableTiming));
    KILN_CUDA_CHECK(cudaEventRecord(p->done, cuda::current_stream()));
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
    check(l.group_start(), "ncclGroupStart");
    for (const Transfer& t : sends)
      if (t.bytes) check(l.send(t.p, t.bytes, ncclUint8, t.peer, comm_, s), "ncclSend");
    for (const Transfer& t : recvs)
      if (t.bytes) check(l.recv(t.p, t.bytes, ncclUint8, t.peer, comm_, s), "ncclRecv");
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
      case CollectiveKind::barrier: {
        // A byte from every rank to every rank.
        char* bytes = staging(size_t(n), s);
        all_gather(bytes + me, bytes, std::vector<int64_t>(size_t(n), 1), DType::b8, s);
        return release(bytes, s);
      }
      case CollectiveKind::send:
        return exchange({{c.peer, const_cast<char*>(in), size_t(c.count) * w}}, {}, s);
      case CollectiveKind::recv: return exchange({}, {{c.peer, out, size_t(c.count) * w}}, s);
    }
  }

  // Completes the pending collectives in order; fails them on NCCL's
  // errors and on the timeout.
  void poll() {
    cudaSetDevice(device_);
    std::unique_lock lock(mu_);
    while (true) {
      cv_.wait(lock, [&] { return stop_ || !pending_.empty(); });
      if (pending_.empty()) return;  // stopping
      std::shared_ptr<Pending> p = pending_.front();
      lock.unlock();
      const cudaError_t q = p->issued ? cudaEventQuery(p->done) : cudaErrorNotReady;
      ncclResult_t async = ncclSuccess;
      std::string error;
      if (q == cudaSuccess) {
      } else if (q != cudaErrorNotReady) {
        error = cat(p->what, " on ", describe(), " failed on the device: ", cudaGetErrorString(q));
      } else if (library().comm_get_async_error(comm_, &async) == ncclSuccess &&
                 async != ncclSuccess && async != ncclInProgress) {
        error = cat(p->what, " on ", describe(), " failed: NCCL reported ",
                    library().get_error_string(async));
      } else if (Clock::now() > p->deadline) {
        error = timeout_message(*p);
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(20));
        lock.lock();
        continue;
      }
      if (!error.empty()) abort(error);
      lock.lock();
      if (error.empty()) {
        p->state->finish();
        cudaEventDestroy(p->done);
        pending_.pop_front();
        continue;
      }
      for (const std::shared_ptr<Pending>& left : pending_) {
        left->state->fail(left == p ? error : cat(left->what, " on ", describe(),
                                                  " failed: an earlier collective did (", error,
                                                  ")"));
        cudaEventDestroy(left->done);
      }
      pending_.clear();
    }
  }

  // The collective that timed out, and which ranks had not started it: each
  // rank's count of started collectives, exchanged over the watch group.
  std::string timeout_message(const Pending& p) {
    std::string head = cat(p.what, " on ", describe(), " did not complete within ",
                           timeout().count(), " ms (collective #", p.seq, " of this group)");
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
               : cat(head, "; world ranks ", behind, " did not arrive");
  }

  // Aborts the communicator (also from this thread while another is
  // blocked in a NCCL call on it, which returns).
  void abort(const std::string& why) {
    std::lock_guard lock(abort_mu_);
    if (!aborted_.empty()) return;
    aborted_ = why;
    library().comm_abort(comm_);
  }

  std::shared_ptr<ProcessGroup> host_, watch_;
  int device_;
  ncclComm_t comm_;
  cudaStream_t stream_ = nullptr;
  // Where collectives captured into CUDA graphs are issued: a device
  // captures one graph at a time, and nothing else uses this stream.
  cudaStream_t capture_stream_ = nullptr;
  cudaEvent_t ready_ = nullptr;
  // The graph being captured (its id) and its collectives on this group;
  // the events its captured collectives were joined through.
  unsigned long long batch_graph_ = 0;
  std::shared_ptr<CapturedBatch> batch_;
  std::vector<cudaEvent_t> captured_events_;
  std::mutex issue_mu_;  // one caller at a time issues NCCL calls
  std::mutex abort_mu_;
  std::string aborted_;  // why the communicator was aborted; empty while usable
  std::atomic<int64_t> started_{0};
  std::mutex mu_;  // the pending list
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Pending>> pending_;
  bool stop_ = false;
  std::thread poller_;
};

}  // namespace

std::shared_ptr<ProcessGroup> nccl_group(std::shared_ptr<ProcessGroup> host, int device) {
  // Every rank checks its device first and learns whether all others can
  // go on, so none is left waiting in NCCL's bootstrap.
  std::string problem;
  try {
    library();
    KILN_CUDA_CHECK(cudaSetDevice(device));
    KILN_CUDA_CHECK(cudaFree(nullptr));  // creates the context
  } catch (const Error& e) {
    problem = e.what();
  }
  const int n = host->size();
  std::vector<int64_t> ok(static_cast<size_t>(n));
  int64_t mine = problem.empty() ? 1 : 0;
  host->all_gather(&mine, ok.data(), 1, DType::i64).wait();
  std::string missing;
  for (int r = 0; r < n; ++r)
    if (!ok[size_t(r)]) missing += cat(missing.empty() ? "" : ", ", host->world_ranks()[size_t(r)]);
  KILN_CHECK(missing.empty(), "NCCL process group over ", host->describe(), " on cuda:", device,
             ": world ranks ", missing, " cannot use NCCL on their GPU",
             problem.empty() ? std::string() : cat("; here: ", problem));

  ncclUniqueId id{};
  static_assert(sizeof id % sizeof(int64_t) == 0);
  if (host->rank() == 0) check(library().get_unique_id(&id), "ncclGetUniqueId");
  host->broadcast(&id, int64_t(sizeof id / sizeof(int64_t)), DType::i64, 0).wait();
  ncclComm_t comm = nullptr;
  check(library().comm_init_rank(&comm, n, id, host->rank()), "ncclCommInitRank");
  return std::make_shared<NcclProcessGroup>(std::move(host), device, comm);
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
