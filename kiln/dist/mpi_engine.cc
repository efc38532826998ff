#include "kiln/dist/mpi_engine.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <string>

#include "kiln/base/error.h"
#include "kiln/base/profile.h"
#include "kiln/dist/world.h"
#include "kiln/runtime/allocator.h"

namespace kiln::dist::mpi {
namespace {

constexpr int kQueryTag = 1, kAnswerTag = 2;

std::string seconds(std::chrono::milliseconds t) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", double(t.count()) / 1000.0);
  return buf;
}

std::string kind_name(int64_t kind) {
  return kind < 0 ? "unknown" : collective_name(CollectiveKind(kind));
}

std::string label(const Op& op) {
  return cat(collective_name(op.kind), " #", op.number, " on ", op.comm->description);
}

// How long a timed-out rank waits for the others to say how far they got:
// live peers answer within milliseconds, dead ones never.
std::chrono::milliseconds grace(std::chrono::milliseconds timeout) {
  return std::min(timeout, std::chrono::milliseconds(1000));
}

}  // namespace

void check(int rc, const std::string& what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int n = 0;
  MPI_Error_string(rc, text, &n);
  fail(what, " failed: ", std::string(text, size_t(n)));
}

Engine& Engine::get() {
  // Never destroyed: the exit handler stops the thread, which finalises MPI
  // while everything that may still use it is alive.
  static Engine* engine = [] {
    auto* e = new Engine();
    std::atexit([] { get().stop(); });
    return e;
  }();
  return *engine;
}

Engine::Engine() {
  std::promise<void> started;
  std::future<void> ready = started.get_future();
  thread_ = std::thread([this, &started] { thread_main(started); });
  try {
    ready.get();
  } catch (...) {
    thread_.join();
    throw;
  }
}

void Engine::thread_main(std::promise<void>& started) {
  try {
    int provided = 0;
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
    KILN_CHECK(provided >= MPI_THREAD_SERIALIZED, "this MPI library gives thread level ", provided,
               ", below MPI_THREAD_SERIALIZED, which kiln's communication thread needs");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size_);
  } catch (...) {
    started.set_exception(std::current_exception());
    return;
  }
  started.set_value();
  profile::set_thread_name("mpi");

  int idle = 0;  // polls in a row that changed nothing
  for (;;) {
    std::deque<std::function<void()>> calls;
    std::deque<std::unique_ptr<Op>> fresh;
    bool stopping;
    {
      std::unique_lock lock(mu_);
      // Spin briefly while operations are in flight (latency), then back off
      // to at most 1 ms (the cores are shared with compute); with nothing in
      // flight, wake every 10 ms to answer diagnosis queries.
      if (in_flight_.empty() || idle > 32) {
        auto wait = in_flight_.empty() ? std::chrono::microseconds(10000)
                                       : std::chrono::microseconds(10 << std::min(idle - 33, 7));
        cv_.wait_for(lock, wait, [&] { return stop_ || !calls_.empty() || !submitted_.empty(); });
      }
      calls.swap(calls_);
      fresh.swap(submitted_);
      stopping = stop_;
    }
    for (auto& c : calls) c();
    for (auto& op : fresh) issue(std::move(op));
    bool progressed = poll() || !calls.empty() || !fresh.empty();
    answer_queries();
    if (stopping && in_flight_.empty()) break;
    idle = progressed ? 0 : idle + 1;
    if (idle > 0 && idle <= 32) std::this_thread::yield();
  }
  shut_down();
}

void Engine::stop() {
  {
    std::lock_guard lock(mu_);
    if (stop_) return;
    stop_ = true;
  }
  cv_.notify_all();
  // MPI_Abort may run the exit handlers on the thread itself.
  if (std::this_thread::get_id() != thread_.get_id()) thread_.join();
}

void Engine::call(std::function<void()> fn) {
  std::packaged_task<void()> task(std::move(fn));
  std::future<void> done = task.get_future();
  {
    std::lock_guard lock(mu_);
    KILN_CHECK(!stop_, "MPI is shut down: the process is exiting");
    calls_.push_back([&task] { task(); });
  }
  cv_.notify_all();
  done.get();
}

Work Engine::submit(std::unique_ptr<Op> op) {
  Work work(op->work);
  {
    std::lock_guard lock(mu_);
    if (stop_) {
      op->work->fail(cat(collective_name(op->kind), " on ", op->comm->description,
                         " was not run: MPI is shut down (the process is exiting)"));
      return work;
    }
    submitted_.push_back(std::move(op));
  }
  cv_.notify_all();
  return work;
}

void Engine::track(std::shared_ptr<Comm> c) {
  call([&] { comms_.push_back(std::move(c)); });
}

void Engine::release(const std::shared_ptr<Comm>& c) {
  try {
    call([&] {
      if (c->failure) return;  // kept: MPI may still complete into its buffers
      MPI_Comm_free(&c->data);
      MPI_Comm_free(&c->control);
      std::erase(comms_, c);
    });
  } catch (const Error&) {
    // The process is exiting: shutting down frees every communicator.
  }
}

void Engine::issue(std::unique_ptr<Op> op) {
  Comm& comm = *op->comm;
  if (comm.failure) {
    op->work->fail(cat("rank ", world_rank_, ": ", collective_name(op->kind), " on ",
                       comm.description, " was not run: an earlier operation on this group "
                       "failed: ", *comm.failure));
    return;
  }
  op->number = ++comm.issued;
  comm.history[size_t(op->number % 256)] = int8_t(op->kind);
  in_flight_.push_back(std::move(op));
}

bool Engine::poll() {
  bool progressed = false;
  std::vector<const Comm*> busy;  // an earlier operation still has MPI calls to make
  for (auto& op : in_flight_) {
    if (op->comm->failure) {
      abandon(*op, cat("rank ", world_rank_, ": ", label(*op), " was not completed: an "
                       "earlier operation on this group failed: ", *op->comm->failure));
      progressed = true;
      continue;
    }
    bool waits = std::find(busy.begin(), busy.end(), op->comm.get()) != busy.end();
    bool calls_later = std::any_of(op->steps.begin(), op->steps.end(),
                                   [](const Step& s) { return s.communicates; });
    if (calls_later) busy.push_back(op->comm.get());
    if (waits) continue;
    try {
      progressed |= advance(*op);
    } catch (const Error& e) {
      std::string why = cat("rank ", world_rank_, ": ", label(*op), ": ", e.what(),
                            " (ranks that run different collectives, or pass different sizes, "
                            "make MPI fail like this)");
      fail_comm(*op->comm, why);
      abandon(*op, why);
      progressed = true;
    }
  }
  // Completed operations leave; failed ones are kept, as MPI may still
  // write into their buffers.
  for (auto& op : in_flight_)
    if (op->work->done() && (op->comm->failure || op->diagnosis))
      abandoned_.push_back(std::move(op));
  std::erase_if(in_flight_, [](const std::unique_ptr<Op>& op) { return !op || op->work->done(); });
  return progressed;
}

bool Engine::advance(Op& op) {
  if (op.diagnosis) return diagnosis_done(op);
  int flag = 1;
  if (!op.requests.empty()) {
    std::vector<MPI_Status> statuses(op.requests.size());
    int rc = MPI_Testall(int(op.requests.size()), op.requests.data(), &flag, statuses.data());
    // The error of the request that failed says more than MPI_ERR_IN_STATUS.
    for (const MPI_Status& s : statuses)
      if (rc == MPI_ERR_IN_STATUS && s.MPI_ERROR != MPI_SUCCESS) rc = s.MPI_ERROR;
    check(rc, "the MPI transfer");
  }
  if (flag) {
    op.requests.clear();
    while (op.requests.empty() && !op.steps.empty()) {
      Step step = std::move(op.steps.front());
      op.steps.pop_front();
      op.called_mpi |= step.communicates;
      step.run(op);
    }
    if (op.requests.empty()) op.work->finish();
    return true;
  }
  if (Clock::now() < op.deadline) return false;
  begin_diagnosis(op);
  return true;
}

void Engine::begin_diagnosis(Op& op) {
  const Comm& c = *op.comm;
  auto d = std::make_unique<Diagnosis>();
  d->query = {op.number, int64_t(op.kind)};
  d->answers.assign(size_t(c.size), {-1, -1, -1});
  d->receives.assign(size_t(c.size), MPI_REQUEST_NULL);
  d->until = Clock::now() + grace(op.timeout);
  for (int p = 0; p < c.size; ++p) {
    if (p == c.rank) continue;
    // A peer that is gone may make these fail: it then simply never answers.
    MPI_Request sent;
    if (MPI_Isend(d->query.data(), 2, MPI_INT64_T, p, kQueryTag, c.control, &sent) == MPI_SUCCESS)
      MPI_Request_free(&sent);
    MPI_Irecv(d->answers[size_t(p)].data(), 3, MPI_INT64_T, p, kAnswerTag, c.control,
              &d->receives[size_t(p)]);
  }
  op.diagnosis = std::move(d);
}

bool Engine::diagnosis_done(Op& op) {
  Diagnosis& d = *op.diagnosis;
  const Comm& c = *op.comm;
  bool all = true;
  for (MPI_Request& r : d.receives) {
    int flag = 1;
    if (r != MPI_REQUEST_NULL && MPI_Test(&r, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS) flag = 0;
    all = all && flag;
  }
  if (!all && Clock::now() < d.until) return false;

  std::string late, other, silent;
  auto add = [](std::string& list, const std::string& item) {
    if (!list.empty()) list += ", ";
    list += item;
  };
  for (int p = 0; p < c.size; ++p) {
    if (p == c.rank) continue;
    const auto& a = d.answers[size_t(p)];
    std::string who = cat("rank ", c.world_ranks[size_t(p)]);
    if (d.receives[size_t(p)] != MPI_REQUEST_NULL)
      add(silent, who);
    else if (a[0] < op.number)
      add(late, a[0] == 0 ? cat(who, " (no operation on this group yet)")
                          : cat(who, " (last: #", a[0], " ", kind_name(a[2]), ")"));
    else if (a[1] >= 0 && a[1] != int64_t(op.kind))
      add(other, cat(who, " called ", kind_name(a[1])));
  }
  std::string why = cat("rank ", world_rank_, ": ", label(op), " did not complete within ",
                        seconds(op.timeout));
  if (!late.empty()) why += cat("; not arrived: ", late);
  if (!other.empty()) why += cat("; called a different operation as #", op.number, ": ", other);
  if (!silent.empty()) why += cat("; no answer (process dead or stuck): ", silent);
  if (late.empty() && other.empty() && silent.empty())
    why += "; every rank reached it but the data did not arrive in time (a slow or failed link)";
  why += cat(". Every rank must run the same collectives in the same order; if a rank is only "
             "slow, raise the timeout (", op.timeout_setting, ")");
  fail_comm(*op.comm, why);
  abandon(op, why);
  return true;
}

void Engine::fail_comm(Comm& comm, const std::string& why) {
  if (!comm.failure) comm.failure = why;
}

void Engine::abandon(Op& op, const std::string& why) {
  if (op.called_mpi)
    for (const auto& [p, bytes] : op.lent) quarantine(p, bytes);
  op.work->fail(why);
}

void Engine::answer_queries() {
  for (const auto& c : comms_) {
    for (;;) {
      int flag = 0;
      MPI_Status status;
      if (MPI_Iprobe(MPI_ANY_SOURCE, kQueryTag, c->control, &flag, &status) != MPI_SUCCESS || !flag)
        break;
      std::array<int64_t, 2> q{};
      if (MPI_Recv(q.data(), 2, MPI_INT64_T, status.MPI_SOURCE, kQueryTag, c->control,
                   MPI_STATUS_IGNORE) != MPI_SUCCESS)
        break;
      int64_t k = q[0];
      bool remembered = k >= 1 && k <= c->issued && c->issued - k < 256;
      int64_t kind_at_k = remembered ? c->history[size_t(k % 256)] : -1;
      int64_t last = c->issued > 0 ? c->history[size_t(c->issued % 256)] : -1;
      c->answers_sent.push_back({c->issued, kind_at_k, last});
      MPI_Request sent;
      if (MPI_Isend(c->answers_sent.back().data(), 3, MPI_INT64_T, status.MPI_SOURCE, kAnswerTag,
                    c->control, &sent) == MPI_SUCCESS)
        MPI_Request_free(&sent);
    }
  }
}

void Engine::shut_down() {
  if (abort_on_exit_ && world_size_ > 1) {
    // Peers failing at the same point get a moment to print their errors.
    std::this_thread::sleep_for(std::chrono::seconds(1));
    std::fprintf(stderr, "kiln: rank %d ended with an error: aborting the MPI job\n", world_rank_);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  for (const auto& c : comms_) {
    if (!c->failure) continue;
    // The peers may be waiting in a collective this rank will never join:
    // end the whole job rather than let it hang.
    std::fprintf(stderr, "kiln: aborting the MPI job after a communication failure: %s\n",
                 c->failure->c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  for (const auto& c : comms_) {
    MPI_Comm_free(&c->data);
    MPI_Comm_free(&c->control);
  }
  MPI_Finalize();
}

}  // namespace kiln::dist::mpi

namespace kiln::dist {

std::string mpi_library() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  mpi::check(MPI_Get_library_version(text, &length), "MPI_Get_library_version");
  std::string s(text, size_t(std::max(length, 0)));
  s = s.substr(0, s.find_first_of("\n,"));
  while (!s.empty() && (s.back() == ' ' || s.back() == '\0')) s.pop_back();
  return s;
}

}  // namespace kiln::dist
