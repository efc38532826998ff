// An Executable is a lowered Program bound to a device: an ordered list of
// kernel launches over one memory arena, with every kernel, buffer offset and
// tensor layout resolved when it is built. Running it enqueues one task on
// the device queue and does no graph work on the host.
//
// Replayed runs (compile.replay) record the launches once per set of input
// buffers (Backend::record: a CUDA graph on CUDA) and replay the recording.
// A recording's buffers stay put: its intermediates and outputs are the
// program's own, the small inputs are copied into buffers of its own before
// each replay and the outputs out of them after it, and the donated and
// large inputs are read where they are (their addresses pick the
// recording, so a parameter's buffer is never copied). The first replayed
// run runs plainly, so that kernels make their one-time state (a loaded
// module, a GEMM plan) outside a recording.
#pragma once
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/runtime/kernel.h"
#include "kiln/runtime/tensor.h"

namespace kiln::compiler {
struct PassOptions;
}

namespace kiln {

struct ExecutableStats {
  size_t launches = 0;         // kernel launches per run
  int64_t arena_bytes = 0;     // intermediates' arena (the memory plan's peak)
  int64_t offload_bytes = 0;   // offloaded intermediates' arena, in the offload pool
  int64_t naive_bytes = 0;     // what the intermediates would take without reuse
  int64_t output_bytes = 0;    // outputs not written into donated inputs
  std::vector<std::pair<int, int>> donated;  // (input, output) pairs that alias
};

struct ReplayStats {
  int64_t recordings = 0;  // sets of input buffers recorded
  int64_t replays = 0;     // runs that replayed a recording
  int64_t plain = 0;       // replayed runs that ran launch by launch instead
  std::string refused;     // why the program is not recorded ("" while it can be)
};

class Executable {
 public:
  // `g` must only use ops with kernels on `device` (see prepare_for_device).
  // `donations` lists (graph input, graph output) pairs whose buffers the
  // output may take over; the caller must not use a donated input afterwards.
  // `name` labels the program in profiles ("the training step").
  Executable(ir::Graph g, Device device, const std::vector<std::pair<int, int>>& donations,
             std::string name = "program");
  ~Executable();

  // `replay`: a replayed run (above).
  std::vector<Tensor> run(std::span<const Tensor> inputs, bool replay = false) const;
  // Runs the program on the calling thread, now, over caller-owned dense
  // buffers (`outputs` must not alias `inputs`): how a kernel that runs a
  // program of its own (scan's loop body) calls it from the device queue.
  void run_inline(std::span<const TensorRef> inputs, std::span<const TensorRef> outputs) const;
  const ir::Graph& graph() const { return graph_; }
  const ExecutableStats& stats() const { return stats_; }
  const std::string& name() const { return name_; }
  ReplayStats replay_stats() const;

  // Recordings made while this many sets of input buffers were seen; runs
  // with further sets run launch by launch.
  static constexpr size_t kMaxRecordings = 128;
  // Inputs up to this size that are not donated are copied into the
  // recording's buffers; larger ones pick the recording by address.
  static constexpr int64_t kCopiedInputBytes = 1 << 20;

  struct Impl;     // the resolved launches and buffer slots (executable_impl.h)
  struct Replays;  // the recordings and their buffers (executable_replay.cc)

 private:
  std::vector<Tensor> dense_inputs(std::span<const Tensor> inputs) const;
  std::vector<Tensor> new_outputs(const std::vector<Tensor>& args) const;
  // The bytes a queued run holds: its inputs, outputs, arenas and largest scratch.
  int64_t held_bytes(const std::vector<Tensor>& args) const;
  // Enqueues a replayed run; false when this run is to run plainly.
  bool enqueue_replay(const std::vector<Tensor>& args, const std::vector<Tensor>& outs,
                      int64_t held_bytes) const;

  ir::Graph graph_;
  Device device_;
  std::string name_;
  ExecutableStats stats_;
  // Queued runs hold both, so an Executable may go while its runs wait.
  std::shared_ptr<Impl> impl_;
  std::shared_ptr<Replays> replays_;
};

// Every program's replay counts in this process, added up, and why each
// program that is not recorded is not (by program name).
struct ReplayTotals {
  int64_t recordings = 0, replays = 0, plain = 0;
  std::map<std::string, std::string> refused;
};
ReplayTotals replay_totals();

struct PoolBytes {
  int64_t device = 0, offload = 0;  // in a device's pool and in its offload pool (host memory)
};
// What the recordings of a program built from `program` (lowered and
// optimized, as get_executable builds it) keep while it lives under
// compile.replay, for an estimate before it is built: its arenas, its copies
// of the small inputs and its own outputs, each a block of the allocator's,
// and its private pool (private_memory.h), which keeps a block for each size
// its kernels' scratch on `device` takes (its nodes run one after another).
PoolBytes replay_buffer_bytes(const ir::Graph& program,
                              const std::vector<std::pair<int, int>>& donations,
                              Device device);

// Rewrites `g` for `device`: every op without a kernel there is replaced by
// its composite (recursively). Errors name the op that can run nowhere.
ir::Graph prepare_for_device(const ir::Graph& g, Device device);

// Per node of `g` (prepared for `device`): the scratch bytes its kernel
// there takes while it runs (Kernel::scratch_bytes; 0 where it declares
// none), for a memory plan's estimate (compiler::PlanOptions::node_scratch).
std::vector<int64_t> kernel_scratch_bytes(const ir::Graph& g, Device device);
// The largest of those: the scratch a program of g's nodes takes at once.
int64_t most_kernel_scratch(const ir::Graph& g, Device device);

// What a program built from `g` (lowered for `device` and optimized with
// `passes`, as get_executable builds it) takes while it runs, beside its
// inputs and outputs: its arenas and its kernels' largest scratch. Runs the
// compiler passes, builds nothing.
struct ProgramRunBytes {
  int64_t arena = 0, offload_arena = 0, scratch = 0;
};
ProgramRunBytes program_run_bytes(const ir::Graph& g, Device device,
                                  const compiler::PassOptions& passes,
                                  const std::vector<std::pair<int, int>>& donations);

}  // namespace kiln
