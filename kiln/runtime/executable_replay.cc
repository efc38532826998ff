// Executable's replayed runs (executable.h): recordings per set of input
// addresses, over buffers every recording of the program shares.
#include <algorithm>
#include <map>
#include <mutex>
#include <set>

#include "kiln/base/error.h"
#include "kiln/base/profile.h"
#include "kiln/runtime/allocator.h"
#include "kiln/runtime/executable_impl.h"
#include "kiln/runtime/private_memory.h"

namespace kiln {
namespace {

// One set of input addresses' recording, made by the first run with them,
// on the queue thread.
struct Recorded {
  std::unique_ptr<RecordedWork> work;
  bool failed = false;
};

struct Copy {
  TensorRef dst, src;
};

int64_t bytes_of(const ir::Graph& g, ir::ValueId v) {
  return g.type(v).shape.numel() * int64_t(itemsize(g.type(v).dtype));
}

// Inputs a recording copies into buffers of its own: the small ones not
// donated (larger ones pick the recording by their address).
bool copied_input(const ir::Graph& g, size_t i, bool donated) {
  return !donated && bytes_of(g, g.inputs()[i]) <= Executable::kCopiedInputBytes;
}

// The recordings of a program and the buffers they all share (their runs
// follow one another on the queue). Queued runs hold it too, so a program
// refused its recordings frees them once the last of those has run.
struct Recordings {
  Arenas arenas;
  std::vector<std::shared_ptr<Storage>> inputs;   // per input: its copy, or null (read in place)
  std::vector<std::shared_ptr<Storage>> outputs;  // per output: the program's own, or null
  std::unique_ptr<PrivateMemory> memory;
  // Last: freed before the memory they were recorded over.
  std::map<std::vector<const void*>, Recorded> recorded;
};

}  // namespace

struct Executable::Replays {
  std::mutex mu;
  ReplayStats stats;
  bool warmed = false;   // a first run ran plainly
  bool checked = false;  // the ops were checked against the backend
  std::shared_ptr<Recordings> recordings;  // made by the first replayed run; dropped once refused
};

namespace {

ReplayTotals& totals() {
  static auto* t = new ReplayTotals;  // never destroyed: queue threads count into it
  return *t;
}
std::mutex totals_mu;

// Counts into a program's stats and the process's totals; with `mu` held.
void count(ReplayStats& stats, int64_t ReplayStats::*field) {
  ++(stats.*field);
  std::lock_guard lock(totals_mu);
  ReplayTotals& t = totals();
  ++(field == &ReplayStats::recordings ? t.recordings : field == &ReplayStats::replays ? t.replays : t.plain);
}

void refuse(ReplayStats& stats, const std::string& program, std::string why) {
  stats.refused = std::move(why);
  std::lock_guard lock(totals_mu);
  totals().refused.emplace(program, stats.refused);
}

}  // namespace

PoolBytes replay_buffer_bytes(const ir::Graph& program,
                              const std::vector<std::pair<int, int>>& donations, Device device) {
  const compiler::MemoryPlan plan =
      compiler::plan_memory(program, donations, {.outputs_in_arena = false});
  const SlotLayout layout = lay_out_slots(program, plan);
  auto block = [&](ir::ValueId v) { return int64_t(CachingAllocator::round_size(size_t(plan.bytes[v]))); };
  PoolBytes r;
  r.device = int64_t(CachingAllocator::round_size(size_t(std::max<int64_t>(plan.peak_bytes, 1))));
  if (plan.offload_peak_bytes > 0)
    r.offload = int64_t(CachingAllocator::round_size(size_t(plan.offload_peak_bytes)));
  std::vector<bool> donated(program.inputs().size(), false);
  for (auto [in, out] : plan.donated) donated[size_t(in)] = true;
  for (size_t i = 0; i < program.inputs().size(); ++i)
    if (copied_input(program, i, donated[i])) r.device += block(program.inputs()[i]);
  for (size_t o = 0; o < program.outputs().size(); ++o) {
    const ir::ValueId v = program.outputs()[o];
    if (own_output(layout, program, o)) (offloaded_value(program, v) ? r.offload : r.device) += block(v);
  }
  std::set<int64_t> scratch_sizes;  // each node's blocks, kept for the next node asking the same
  for (int64_t bytes : kernel_scratch_bytes(program, device))
    if (bytes > 0) scratch_sizes.insert(bytes);
  for (int64_t b : scratch_sizes) r.device += b;
  return r;
}

ReplayTotals replay_totals() {
  std::lock_guard lock(totals_mu);
  return totals();
}

std::shared_ptr<Executable::Replays> new_replays() { return std::make_shared<Executable::Replays>(); }

ReplayStats Executable::replay_stats() const {
  std::lock_guard lock(replays_->mu);
  return replays_->stats;
}

bool Executable::enqueue_replay(const std::vector<Tensor>& args, const std::vector<Tensor>& outs,
                                int64_t held_bytes) const {
  Replays& r = *replays_;
  std::unique_lock lock(r.mu);
  Backend& b = backend(device_);
  if (!r.checked) {
    r.checked = true;
    for (const Step& s : impl_->steps) {
      if (!s.kernel->reads_on_host || b.records_host_work()) continue;
      refuse(r.stats, name_, cat("op '", s.op->name, "' cannot be recorded on ", to_string(device_),
                                 ", whose recordings hold device work only: it reads on the host ",
                                 s.kernel->reads_on_host, "; the program runs launch by launch"));
      break;
    }
  }
  const bool first = !r.warmed;
  r.warmed = true;
  if (first || !r.stats.refused.empty()) {
    count(r.stats, &ReplayStats::plain);
    return false;
  }

  const auto& inputs = graph_.inputs();
  const auto& outputs = graph_.outputs();
  if (!r.recordings) {
    auto made = std::make_shared<Recordings>(Recordings{Arenas(device_, stats_), {}, {}, nullptr, {}});
    std::vector<bool> donated(inputs.size(), false);
    for (auto [in, out] : stats_.donated) donated[size_t(in)] = true;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const size_t bytes = size_t(bytes_of(graph_, inputs[i]));
      made->inputs.push_back(copied_input(graph_, i, donated[i]) ? std::make_shared<Storage>(device_, bytes)
                                                                 : nullptr);
    }
    for (size_t o = 0; o < outputs.size(); ++o) {
      const Storage& out = *outs[o].impl().storage;
      made->outputs.push_back(own_output(*impl_, graph_, o)
                                  ? std::make_shared<Storage>(device_, out.nbytes, out.pool)
                                  : nullptr);
    }
    made->memory = std::make_unique<PrivateMemory>(device_);
    r.recordings = std::move(made);
  }
  std::shared_ptr<Recordings> shared = r.recordings;

  std::vector<const void*> key;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!shared->inputs[i]) key.push_back(data_of(args[i]));
  auto it = shared->recorded.find(key);
  if (it == shared->recorded.end()) {
    if (shared->recorded.size() >= kMaxRecordings) {
      count(r.stats, &ReplayStats::plain);
      return false;
    }
    it = shared->recorded.try_emplace(std::move(key)).first;
  }
  Recorded* rec = &it->second;  // the map's node: lives as long as `shared`

  auto ref = [&](ir::ValueId v, void* data) {
    const ir::TypeInfo& t = graph_.type(v);
    return TensorRef{data, t.dtype, t.shape, contiguous_strides(t.shape)};
  };
  std::vector<TensorRef> refs(graph_.values().size());
  std::vector<Copy> copy_in, copy_out;
  for (size_t v = 0; v < refs.size(); ++v) {
    const Slot& s = impl_->slots[v];
    const size_t w = size_t(s.where);
    void* data = nullptr;
    if (s.kind == Slot::input)
      data = shared->inputs[w] ? shared->inputs[w]->data : data_of(args[w]);
    else if (s.kind == Slot::output)
      data = shared->outputs[w] ? shared->outputs[w]->data : data_of(outs[w]);
    else
      data = shared->arenas.at(s);
    refs[v] = ref(ir::ValueId(v), data);
  }
  for (size_t i = 0; i < inputs.size(); ++i)
    if (shared->inputs[i])
      copy_in.push_back({ref(inputs[i], shared->inputs[i]->data), ref(inputs[i], data_of(args[i]))});
  for (size_t o = 0; o < outputs.size(); ++o)
    if (shared->outputs[o])
      copy_out.push_back({ref(outputs[o], data_of(outs[o])), ref(outputs[o], shared->outputs[o]->data)});
  lock.unlock();

  std::vector<std::shared_ptr<Storage>> keep;
  for (const Tensor& t : args) keep.push_back(t.impl().storage);
  for (const Tensor& t : outs) keep.push_back(t.impl().storage);
  auto task = [impl = std::shared_ptr<const Impl>(impl_), device = device_, name = name_, state = replays_,
               shared = std::move(shared), rec, refs = std::move(refs), copy_in = std::move(copy_in),
               copy_out = std::move(copy_out), keep = std::move(keep)] {
    Backend& b = backend(device);
    for (const Copy& c : copy_in) b.strided_copy(c.dst, c.src);
    PrivateMemory* memory = shared->memory.get();
    bool refused = false;
    {
      std::lock_guard l(state->mu);
      refused = !state->stats.refused.empty();  // by a run queued before this one
    }
    if (!rec->work && !rec->failed && !refused) {
      try {
        rec->work = b.record(device.index, [impl, refs, memory, device, name] {
          PrivateMemoryScope scope(*memory);
          launch_all(*impl, refs, device, name);
        });
        std::lock_guard l(state->mu);
        count(state->stats, &ReplayStats::recordings);
      } catch (const std::exception& e) {
        rec->failed = true;
        std::lock_guard l(state->mu);
        refuse(state->stats, name, cat("recording it failed: ", e.what()));
        // Later runs are plain, over buffers of their own: these go with
        // the runs already queued.
        state->recordings.reset();
      }
    }
    if (rec->work) {
      profile::Span span("program", name + " (replay)");
      rec->work->replay();
    } else {
      launch_all(*impl, refs, device, name);
    }
    for (const Copy& c : copy_out) b.strided_copy(c.dst, c.src);
    std::lock_guard l(state->mu);
    count(state->stats, rec->work ? &ReplayStats::replays : &ReplayStats::plain);
  };
  b.queue(device_.index).enqueue(std::move(task), "compiled program (replayed)", held_bytes);
  return true;
}

}  // namespace kiln
