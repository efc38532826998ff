// Memory planning: where each value of a program lives.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "kiln/ir/graph.h"

namespace kiln::compiler {

struct PlanOptions {
  // Graph outputs get arena offsets too. An executor that hands outputs to
  // the caller in buffers of their own turns this off, so the arena holds
  // only intermediates.
  bool outputs_in_arena = true;
  // Estimates only: per node, the bytes its kernel takes beside its outputs
  // while it runs (runtime's kernel_scratch_bytes, in the allocator's
  // blocks), planned as a value that lives for that node alone. Empty: none.
  std::vector<int64_t> node_scratch;
  // Estimates only: the bytes a buffer of its own takes for a value of
  // `bytes` (an allocator's size class), for the live peaks. Null: the
  // bytes aligned to kAlignment.
  int64_t (*buffer_bytes)(int64_t bytes) = nullptr;
  // Estimates only: the graph inputs (by index) the caller gives up to the
  // program, which the live peaks count from the start to their last read
  // (to the end when returned); other inputs are not counted.
  std::vector<int> released_inputs;
};

struct MemoryPlan {
  static constexpr int64_t kAlignment = 64;  // bytes; every offset is a multiple

  // Per value id: its arena offset in bytes, or -1 when it is not in an
  // arena (graph inputs, outputs written into a donated input's buffer,
  // outputs when !outputs_in_arena).
  std::vector<int64_t> offsets;
  // Per value id: whether `offsets` is in the offload arena, the host
  // memory of offloaded outputs (OpDef::offloaded_output).
  std::vector<bool> offloaded;
  // Per value id: its size in bytes.
  std::vector<int64_t> bytes;
  // Per value id: the value in whose buffer it is written, or -1. What a
  // wait completes (or a reshape reshapes) is written in the result when
  // that is placed outside the arena (a returned output) and nothing else
  // reads it.
  std::vector<ir::ValueId> written_in;
  // The (graph input, graph output) donations honoured: the output is
  // written into that input's buffer.
  std::vector<std::pair<int, int>> donated;
  int64_t peak_bytes = 0;   // the device arena's size
  int64_t naive_bytes = 0;  // every device arena value in a buffer of its own (aligned sizes)
  int64_t offload_peak_bytes = 0;  // the offload arena's size
  // The most bytes live at once in the device's and the offload pool when
  // each value (and each node's scratch) has a buffer of its own, as in
  // eager mode: no arena's packing (PlanOptions::buffer_bytes), and the
  // inputs the caller gives up (PlanOptions::released_inputs) counted.
  int64_t live_peak_bytes = 0, offload_live_peak_bytes = 0;

  bool in_arena(ir::ValueId v) const { return offsets.at(v) >= 0; }
  // The offset of `v` in its arena; a value outside both is a kiln::Error.
  int64_t offset_of(ir::ValueId v) const;
};

// Plans the arena by liveness over node order: a value lives from the node
// that defines it to the last node that reads it (to the end for graph
// outputs); values live at the same time never overlap, and freed space is
// reused best-fit. Outputs of offloading ops are planned the same way in
// an arena of their own. A node's outputs never share memory with its inputs,
// except a wait's (OpDef::aliases_first_input: collective_wait,
// transfer_wait) and a reshape's (OpDef::reinterprets_first_input), which
// is its first input's buffer (kept live until the last read of either)
// where both are planned here and the input is a node's; where the result
// is placed elsewhere and only it reads the input, the input is written
// there (written_in), into a donated input's buffer only when the donor is
// read for the last time before the node that makes the input.
//
// `donations` lists (graph input index, graph output index) pairs whose
// buffers the caller lets alias. One is honoured when the input and output
// have the same dtype and byte size, the input is not itself returned, the
// output is computed by a node (and is the first position of that value in
// the outputs), and the input is read for the last time before the node
// that computes the output, or by that node itself when the node is
// element-aligned and the output has exactly the input's type: an
// elementwise op with one output, or a fused elementwise node whose outputs
// all have one shape (AdamW's parameter, m and v updates), whose kernel
// reads element i of every input before writing element i of any output.
// Kernels of such nodes must allow an output to alias an input.
//
// Other view ops (FusionClass::view: permute, slice, expand) get buffers of
// their own, like any op, as does a reshape of a graph input.
MemoryPlan plan_memory(const ir::Graph& g, const std::vector<std::pair<int, int>>& donations,
                       const PlanOptions& options = {});

}  // namespace kiln::compiler
