// Executable's internals, shared by its plain runs (executable.cc) and its
// recorded ones (executable_replay.cc).
#pragma once
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "kiln/compiler/memory_plan.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/executable.h"

namespace kiln {

// Where a value lives while the program runs.
struct Slot {
  enum Kind { input, arena, offload_arena, output } kind;
  int64_t where;  // input index, arena offset in bytes, or output index
};
inline bool same_slot(const Slot& a, const Slot& b) { return a.kind == b.kind && a.where == b.where; }

struct Step {
  const ir::OpDef* op;
  const Kernel* kernel;
  ir::Attrs attrs;
  std::vector<ir::ValueId> in, out;
  std::string text;  // the node, for error messages
};

// A run's intermediates: the device arena, and the offload arena where the
// program offloads activations.
struct Arenas {
  std::shared_ptr<Storage> device, offload;
  Arenas(Device d, const ExecutableStats& stats)
      : device(std::make_shared<Storage>(d, size_t(std::max<int64_t>(stats.arena_bytes, 1)))) {
    if (stats.offload_bytes > 0)
      offload = std::make_shared<Storage>(d, size_t(stats.offload_bytes), Pool::offload);
  }
  // An offloaded value of no bytes has no arena to point into (nor a read).
  char* at(const Slot& s) const {
    if (s.kind != Slot::offload_arena) return static_cast<char*>(device->data) + s.where;
    return offload ? static_cast<char*>(offload->data) + s.where : nullptr;
  }
};

// Where a program's values live, from its memory plan: what a built
// program runs over, and what a replay estimate reads before any is built.
struct SlotLayout {
  std::vector<Slot> slots;               // per value id
  std::vector<int> output_value_index;   // per graph output: its first position (deduplicated)
  std::vector<int> donated_input;        // per graph output: the input whose buffer it takes, or -1
};
SlotLayout lay_out_slots(const ir::Graph& g, const compiler::MemoryPlan& plan);

// Whether output `o` of `g` gets a buffer of its own each run (not an
// input's, not a repeat of an earlier output, not a donated input's).
inline bool own_output(const SlotLayout& l, const ir::Graph& g, size_t o) {
  return l.slots[size_t(g.outputs()[o])].kind == Slot::output &&
         l.output_value_index[o] == int(o) && l.donated_input[o] < 0;
}
// Whether a graph's value is made in the offload pool (OpDef::offloaded_output).
bool offloaded_value(const ir::Graph& g, ir::ValueId v);

struct Executable::Impl : SlotLayout {
  std::vector<Step> steps;
  int64_t most_scratch = 0;  // the most a kernel takes beside its outputs (Kernel::scratch_bytes)
};

// Every kernel launch of the program, in order, over the resolved buffers;
// the transfers it started end with it (kiln/runtime/transfer.h).
void launch_all(const Executable::Impl& impl, const std::vector<TensorRef>& refs, Device device,
                const std::string& program);

// A new program's replay state (executable_replay.cc).
std::shared_ptr<Executable::Replays> new_replays();

// Where a tensor's element 0 is.
inline char* data_of(const Tensor& t) {
  const TensorImpl& i = t.impl();
  return static_cast<char*>(i.storage->data) + i.offset * int64_t(itemsize(i.dtype));
}

}  // namespace kiln
