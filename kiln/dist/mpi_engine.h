// The MPI backend's communication thread (internal to kiln/dist). It alone
// calls MPI: it initialises MPI (MPI_THREAD_SERIALIZED, as the callers'
// threads never call MPI themselves), issues every operation as
// non-blocking MPI calls, polls them with MPI_Test so that callers compute
// meanwhile, fails an operation that passes its deadline, and at exit
// finalises MPI, or aborts the job when a communication failed (the peers
// would otherwise wait on this rank for ever).
//
// When an operation times out, the thread asks the group's other members,
// on a separate control communicator, how far they got; every member's
// thread answers while it polls. That is how the error can say which ranks
// never arrived, which called a different collective, and which are gone.
#pragma once
#include <mpi.h>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "kiln/dist/process_group.h"
#include "kiln/dist/work.h"

namespace kiln::dist::mpi {

struct Op;
using Clock = std::chrono::steady_clock;

// Throws kiln::Error naming `what` when an MPI call did not succeed.
void check(int rc, const std::string& what);

// A communicator pair and what the thread tracks on it.
struct Comm {
  MPI_Comm data = MPI_COMM_NULL;     // the group's operations
  MPI_Comm control = MPI_COMM_NULL;  // diagnosis queries, apart from the data
  int rank = 0, size = 1;
  std::string description;           // ProcessGroup::describe()
  std::vector<int> world_ranks;
  // Engine thread only:
  int64_t issued = 0;                   // operations issued so far
  std::array<int8_t, 256> history{};  // kinds of the last 256, by number % 256
  std::optional<std::string> failure;   // once set, operations fail at once
  std::deque<std::array<int64_t, 3>> answers_sent;  // buffers of in-flight answers
};

// Answers to "how far did you get?" (one per member) after a timeout.
struct Diagnosis {
  std::array<int64_t, 2> query{};                 // {operation number, kind}
  std::vector<std::array<int64_t, 3>> answers;    // {issued, kind of that number, last kind}
  std::vector<MPI_Request> receives;              // MPI_REQUEST_NULL once answered
  Clock::time_point until;
};

// A step of an operation: issues non-blocking MPI calls into op.requests,
// or computes (the local reduction of a reducing collective).
struct Step {
  std::function<void(Op&)> run;
  bool communicates = true;
};

// One operation in flight: steps run one after another, each when the MPI
// requests of the one before have completed.
//
// MPI needs every rank to call the collectives of a communicator in the
// same order, so an operation makes its first MPI call only once the
// operations submitted before it on that communicator have made their last
// (a multi-step all_reduce would otherwise interleave its second call with
// later operations in an order that depends on timing).
struct Op {
  std::shared_ptr<Comm> comm;
  CollectiveKind kind = CollectiveKind::barrier;
  std::chrono::milliseconds timeout{0};
  std::string timeout_setting;  // what sets it (ProcessGroup::timeout_setting), for the message
  Clock::time_point deadline;
  std::deque<Step> steps;
  std::vector<MPI_Request> requests;
  std::vector<std::vector<int>> arrays;  // counts and displacements MPI reads until completion
  std::vector<char> scratch;
  // A small operation's own copies of the caller's buffers (input, then
  // output): a timed-out operation is kept, and MPI may still write into
  // them when a peer arrives late, after the caller's are gone.
  std::vector<char> staged;
  // A larger one's buffers are the caller's: when it fails after its first
  // MPI call they are quarantined (runtime/allocator.h) before the caller
  // hears of it, so a late peer's data never lands in reused memory.
  std::vector<std::pair<const void*, size_t>> lent;
  bool called_mpi = false;
  int64_t number = 0;  // 1-based, per communicator; set when issued
  std::shared_ptr<WorkState> work = std::make_shared<WorkState>();
  std::unique_ptr<Diagnosis> diagnosis;
};

class Engine {
 public:
  // The first call starts the thread and initialises MPI.
  static Engine& get();
  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }

  // Runs fn on the thread, between polls, and rethrows its kiln::Error: for
  // the blocking set-up calls (creating and freeing communicators).
  void call(std::function<void()> fn);
  // Queues the operation (issued in submission order) and returns its Work.
  Work submit(std::unique_ptr<Op> op);
  // Starts answering diagnosis queries on c; release() frees it (a failed
  // one is kept: MPI may still write into its buffers). Never throws.
  void track(std::shared_ptr<Comm> c);
  void release(const std::shared_ptr<Comm>& c);
  // Shut down with MPI_Abort rather than MPI_Finalize (world.h end_job_on_exit).
  void abort_on_exit() { abort_on_exit_ = true; }

 private:
  Engine();
  void thread_main(std::promise<void>& started);
  void stop();
  bool poll();
  void issue(std::unique_ptr<Op> op);
  bool advance(Op& op);
  void begin_diagnosis(Op& op);
  bool diagnosis_done(Op& op);
  void fail_comm(Comm& comm, const std::string& why);
  void abandon(Op& op, const std::string& why);
  void answer_queries();
  void shut_down();

  int world_rank_ = 0, world_size_ = 1;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Op>> submitted_;
  std::deque<std::function<void()>> calls_;
  bool stop_ = false;
  std::atomic<bool> abort_on_exit_{false};
  std::thread thread_;
  // Thread only:
  std::vector<std::unique_ptr<Op>> in_flight_;
  std::vector<std::unique_ptr<Op>> abandoned_;  // timed out: MPI may still use their buffers
  std::vector<std::shared_ptr<Comm>> comms_;
};

}  // namespace kiln::dist::mpi
