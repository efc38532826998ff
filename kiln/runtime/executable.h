// An Executable is a lowered Program bound to a device: an ordered list of
// kernel launches over one memory arena, with every kernel, buffer offset and
// tensor layout resolved when it is built. Running it enqueues one task on
// the device queue and does no graph work on the host.
#pragma once
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/runtime/kernel.h"
#include "kiln/runtime/tensor.h"

namespace kiln {

struct ExecutableStats {
  size_t launches = 0;         // kernel launches per run
  int64_t arena_bytes = 0;     // intermediates' arena (the memory plan's peak)
  int64_t offload_bytes = 0;   // offloaded intermediates' arena, in the offload pool
  int64_t naive_bytes = 0;     // what the intermediates would take without reuse
  int64_t output_bytes = 0;    // outputs not written into donated inputs
  std::vector<std::pair<int, int>> donated;  // (input, output) pairs that alias
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

  std::vector<Tensor> run(std::span<const Tensor> inputs) const;
  // Runs the program on the calling thread, now, over caller-owned dense
  // buffers (`outputs` must not alias `inputs`): how a kernel that runs a
  // program of its own (scan's loop body) calls it from the device queue.
  void run_inline(std::span<const TensorRef> inputs, std::span<const TensorRef> outputs) const;
  const ir::Graph& graph() const { return graph_; }
  const ExecutableStats& stats() const { return stats_; }
  const std::string& name() const { return name_; }

  struct Impl;  // the resolved launches and buffer slots (executable.cc)

 private:
  ir::Graph graph_;
  Device device_;
  std::string name_;
  ExecutableStats stats_;
  std::unique_ptr<Impl> impl_;
};

// Rewrites `g` for `device`: every op without a kernel there is replaced by
// its composite (recursively). Errors name the op that can run nowhere.
ir::Graph prepare_for_device(const ir::Graph& g, Device device);

}  // namespace kiln
