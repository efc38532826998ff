#include "kiln/runtime/executable.h"

#include <algorithm>

#include "kiln/base/error.h"
#include "kiln/compiler/memory_plan.h"
#include "kiln/compiler/pipeline.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/context.h"
#include "kiln/runtime/dispatch.h"
#include "kiln/runtime/eager.h"
#include "kiln/runtime/executable_impl.h"
#include "kiln/runtime/kernel_launch.h"
#include "kiln/runtime/recording.h"
#include "kiln/runtime/transfer.h"

namespace kiln {

// Every kernel launch of the program, in order, over the resolved buffers.
void launch_all(const Executable::Impl& impl, const std::vector<TensorRef>& refs, Device device,
                const std::string& program) {
  profile::Span span("program", program);
  TransferScope transfers;
  std::vector<TensorRef> in, out;
  for (const Step& s : impl.steps) {
    in.clear();
    out.clear();
    for (ir::ValueId v : s.in) in.push_back(refs[v]);
    bool empty = true;
    for (ir::ValueId v : s.out) {
      out.push_back(refs[v]);
      empty = empty && refs[v].numel() == 0;
    }
    if (empty && !out.empty()) continue;
    try {
      launch(*s.kernel, KernelArgs{in, out, s.attrs, *s.op, device}, &program);
    } catch (const std::exception& e) {
      drain_in_flight();
      fail("in a compiled program, ", s.text, ": ", e.what());
    }
  }
  transfers.finish();
}

SlotLayout lay_out_slots(const ir::Graph& g, const compiler::MemoryPlan& plan) {
  SlotLayout l;
  l.slots.assign(g.values().size(), Slot{Slot::arena, 0});
  for (size_t i = 0; i < g.inputs().size(); ++i) l.slots[g.inputs()[i]] = {Slot::input, int64_t(i)};
  l.donated_input.assign(g.outputs().size(), -1);
  for (auto [in, out] : plan.donated) l.donated_input[out] = in;
  for (size_t o = 0; o < g.outputs().size(); ++o) {
    ir::ValueId v = g.outputs()[o];
    l.output_value_index.push_back(int(o));
    for (size_t p = 0; p < o; ++p)
      if (g.outputs()[p] == v) l.output_value_index[o] = int(p);
    if (l.slots[v].kind == Slot::input || l.output_value_index[o] != int(o)) continue;
    l.slots[v] = {Slot::output, int64_t(o)};
  }
  for (size_t v = 0; v < g.values().size(); ++v) {
    Slot& s = l.slots[v];
    if (s.kind != Slot::arena || plan.written_in[v] >= 0) continue;
    s.where = plan.offset_of(ir::ValueId(v));
    if (plan.offloaded[v]) s.kind = Slot::offload_arena;
  }
  for (size_t v = 0; v < g.values().size(); ++v)
    if (plan.written_in[v] >= 0) l.slots[v] = l.slots[size_t(plan.written_in[v])];
  return l;
}

bool offloaded_value(const ir::Graph& g, ir::ValueId v) {
  const int def = g.values()[v].node;
  if (def < 0) return false;
  const ir::Node& n = g.nodes()[size_t(def)];
  const size_t k = size_t(std::find(n.outputs.begin(), n.outputs.end(), v) - n.outputs.begin());
  return ir::output_offloaded(*n.op, n.attrs, k);
}

Executable::Executable(ir::Graph g, Device device,
                       const std::vector<std::pair<int, int>>& donations, std::string name)
    : graph_(std::move(g)),
      device_(device),
      name_(std::move(name)),
      impl_(std::make_shared<Impl>()),
      replays_(new_replays()) {
  compiler::MemoryPlan plan = compiler::plan_memory(graph_, donations, {.outputs_in_arena = false});
  static_cast<SlotLayout&>(*impl_) = lay_out_slots(graph_, plan);
  for (size_t o = 0; o < graph_.outputs().size(); ++o) {  // what new_outputs allocates
    const ir::ValueId v = graph_.outputs()[o];
    if (impl_->slots[v].kind != Slot::input && impl_->output_value_index[o] == int(o) &&
        impl_->donated_input[o] < 0)
      stats_.output_bytes += graph_.type(v).shape.numel() * int64_t(itemsize(graph_.type(v).dtype));
  }

  for (const ir::Node& n : graph_.nodes()) {
    // A reshape whose result the plan put in its input's buffer: nothing to run.
    if (n.op->reinterprets_first_input && same_slot(impl_->slots[n.inputs[0]], impl_->slots[n.outputs[0]]))
      continue;
    const Kernel* k = find_kernel(device.kind, n.op->name);
    KILN_CHECK(k, "op '", n.op->name, "' has no kernel on ", to_string(device),
               " (in a compiled program: ", ir::node_to_text(graph_, n), ")");
    impl_->steps.push_back({n.op, k, n.attrs, n.inputs, n.outputs, ir::node_to_text(graph_, n)});
    if (!k->prepare) continue;
    std::vector<ir::TypeInfo> types;
    for (ir::ValueId v : n.inputs) types.push_back(graph_.type(v));
    try {
      k->prepare(PrepareArgs{types, n.attrs, *n.op, device});
    } catch (const std::exception&) {
      // Dropped: the node's call raises it, naming the node (kernel.h).
    }
  }
  stats_.launches = impl_->steps.size();
  stats_.arena_bytes = plan.peak_bytes;
  stats_.offload_bytes = plan.offload_peak_bytes;
  stats_.naive_bytes = plan.naive_bytes;
  impl_->most_scratch = most_kernel_scratch(graph_, device);
  stats_.donated = plan.donated;
}

Executable::~Executable() = default;

std::vector<Tensor> Executable::dense_inputs(std::span<const Tensor> inputs) const {
  KILN_CHECK(inputs.size() == graph_.inputs().size(), "compiled program takes ",
             graph_.inputs().size(), " inputs, got ", inputs.size());
  std::vector<Tensor> args(inputs.begin(), inputs.end());
  for (size_t i = 0; i < args.size(); ++i) {
    ensure_materialized(args[i]);
    KILN_CHECK(args[i].type() == graph_.type(graph_.inputs()[i]), "compiled program input ", i,
               " must be ", ir::to_string(graph_.type(graph_.inputs()[i])), ", got ",
               ir::to_string(args[i].type()));
    // Program kernels read inputs as dense buffers; the copy runs now, in
    // strict mode, even when the caller is deferring.
    if (!args[i].is_contiguous()) {
      EagerModeGuard strict(EagerMode::strict);
      args[i] = apply1(KILN_OP("copy"), {args[i]});
    }
  }
  return args;
}

// The donated input's buffer, or a fresh one.
std::vector<Tensor> Executable::new_outputs(const std::vector<Tensor>& args) const {
  size_t n_out = graph_.outputs().size();
  std::vector<Tensor> outs(n_out);
  for (size_t o = 0; o < n_out; ++o) {
    ir::ValueId v = graph_.outputs()[o];
    const Slot& s = impl_->slots[v];
    if (s.kind == Slot::input) {
      outs[o] = args[s.where];
    } else if (impl_->output_value_index[o] != int(o)) {
      outs[o] = outs[impl_->output_value_index[o]];
    } else if (impl_->donated_input[o] >= 0) {
      const Tensor& in = args[impl_->donated_input[o]];
      auto impl = std::make_shared<TensorImpl>(in.impl());
      outs[o] = Tensor(std::move(impl));
    } else {
      outs[o] = new_tensor(graph_.type(v), device_,
                           offloaded_value(graph_, v) ? Pool::offload : Pool::device);
    }
  }
  return outs;
}

int64_t Executable::held_bytes(const std::vector<Tensor>& args) const {
  std::vector<std::shared_ptr<Storage>> storages;
  for (const Tensor& t : args) storages.push_back(t.impl().storage);
  int64_t bytes = distinct_bytes(storages) + stats_.arena_bytes + stats_.offload_bytes +
                  impl_->most_scratch;
  for (ir::ValueId v : graph_.outputs())
    bytes += graph_.type(v).shape.numel() * int64_t(itemsize(graph_.type(v).dtype));
  return bytes;
}

std::vector<Tensor> Executable::run(std::span<const Tensor> inputs, bool replay) const {
  const std::vector<Tensor> args = dense_inputs(inputs);
  const int64_t held = held_bytes(args);
  backend(device_).queue(device_.index).make_room(held);  // before the outputs are allocated
  std::vector<Tensor> outs = new_outputs(args);
  if (replay && enqueue_replay(args, outs, held)) {
    if (eager_mode() == EagerMode::debug) synchronize(device_);
    return outs;
  }
  Arenas arenas(device_, stats_);

  // Every value's buffer, resolved once per run.
  std::vector<TensorRef> refs(graph_.values().size());
  std::vector<std::shared_ptr<Storage>> keep{arenas.device, arenas.offload};
  for (size_t v = 0; v < refs.size(); ++v) {
    const ir::TypeInfo& t = graph_.type(ir::ValueId(v));
    const Slot& s = impl_->slots[v];
    char* data = s.kind == Slot::input    ? data_of(args[s.where])
                 : s.kind == Slot::output ? data_of(outs[s.where])
                                          : arenas.at(s);
    refs[v] = {data, t.dtype, t.shape, contiguous_strides(t.shape)};
  }
  for (const Tensor& t : args) keep.push_back(t.impl().storage);
  for (const Tensor& t : outs) keep.push_back(t.impl().storage);

  auto task = [impl = std::shared_ptr<const Impl>(impl_), device = device_, name = name_,
               refs = std::move(refs), keep = std::move(keep)] { launch_all(*impl, refs, device, name); };
  backend(device_).queue(device_.index).enqueue(std::move(task), "compiled program", held);
  if (eager_mode() == EagerMode::debug) synchronize(device_);
  return outs;
}

void Executable::run_inline(std::span<const TensorRef> inputs,
                            std::span<const TensorRef> outputs) const {
  KILN_CHECK(inputs.size() == graph_.inputs().size() && outputs.size() == graph_.outputs().size(),
             "compiled program takes ", graph_.inputs().size(), " inputs and ",
             graph_.outputs().size(), " outputs, got ", inputs.size(), " and ", outputs.size());
  KILN_CHECK(stats_.donated.empty(), "run_inline: a program with donated inputs");
  Arenas arenas(device_, stats_);
  std::vector<TensorRef> refs(graph_.values().size());
  for (size_t v = 0; v < refs.size(); ++v) {
    const ir::TypeInfo& t = graph_.type(ir::ValueId(v));
    const Slot& s = impl_->slots[v];
    void* data = s.kind == Slot::input    ? inputs[size_t(s.where)].data
                 : s.kind == Slot::output ? outputs[size_t(s.where)].data
                                          : arenas.at(s);
    refs[v] = {data, t.dtype, t.shape, contiguous_strides(t.shape)};
  }
  launch_all(*impl_, refs, device_, name_);
  // Outputs that are an input, or repeat an earlier output, were not written.
  // The copy is the backend's: the buffers are on the device.
  for (size_t o = 0; o < outputs.size(); ++o) {
    ir::ValueId v = graph_.outputs()[o];
    void* from = impl_->slots[v].kind == Slot::input ? refs[v].data
                 : impl_->output_value_index[o] != int(o)
                     ? outputs[size_t(impl_->output_value_index[o])].data
                     : nullptr;
    if (!from) continue;
    TensorRef dst = refs[v];
    dst.data = outputs[o].data;
    TensorRef src = refs[v];
    src.data = from;
    backend(device_).strided_copy(dst, src);
  }
}

std::vector<int64_t> kernel_scratch_bytes(const ir::Graph& g, Device device) {
  std::vector<int64_t> bytes;
  for (const ir::Node& n : g.nodes()) {
    const Kernel* k = find_kernel(device.kind, n.op->name);
    std::vector<ir::TypeInfo> types;
    if (k && k->scratch_bytes)
      for (ir::ValueId v : n.inputs) types.push_back(g.type(v));
    bytes.push_back(k && k->scratch_bytes ? k->scratch_bytes(PrepareArgs{types, n.attrs, *n.op, device}) : 0);
  }
  return bytes;
}

int64_t most_kernel_scratch(const ir::Graph& g, Device device) {
  int64_t most = 0;
  for (int64_t b : kernel_scratch_bytes(g, device)) most = std::max(most, b);
  return most;
}

ProgramRunBytes program_run_bytes(const ir::Graph& g, Device device,
                                  const compiler::PassOptions& passes,
                                  const std::vector<std::pair<int, int>>& donations) {
  const ir::Graph program = compiler::optimize(prepare_for_device(g, device), passes);
  const compiler::MemoryPlan plan =
      compiler::plan_memory(program, donations, {.outputs_in_arena = false});
  return {plan.peak_bytes, plan.offload_peak_bytes, most_kernel_scratch(program, device)};
}

ir::Graph prepare_for_device(const ir::Graph& g, Device device) {
  auto rec = Recording::create();
  std::vector<Tensor> inputs;
  for (ir::ValueId v : g.inputs()) inputs.push_back(rec->tensor(rec->graph.add_input(g.type(v)), device));
  std::vector<Tensor> outs;
  {
    ContextGuard lower(std::make_shared<TraceContext>(rec, device));
    outs = run_graph(g, inputs, "lowering");
  }
  KILN_CHECK(rec->captured.empty(), "lowering for ", to_string(device),
             ": a composite read a tensor from outside its inputs");
  std::vector<ir::ValueId> ids;
  for (const Tensor& t : outs) ids.push_back(rec->value_of(t));
  rec->graph.set_outputs(ids);
  return std::move(rec->graph);
}

}  // namespace kiln
