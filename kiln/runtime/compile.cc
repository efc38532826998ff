#include "kiln/runtime/compile.h"

#include <chrono>
#include <cstdlib>
#include <future>
#include <iostream>
#include <optional>

#include "kiln/base/error.h"
#include "kiln/runtime/compile_pool.h"
#include "kiln/runtime/context.h"
#include "kiln/runtime/graph_runner.h"
#include "kiln/runtime/recording.h"
#include "kiln/runtime/segmented_program.h"
#include "kiln/runtime/spmd.h"

namespace kiln {
namespace {

// Safe and skinny calls of one signature compile differently.
std::string signature(const std::vector<Tensor>& args, const std::string& static_key, bool safe) {
  std::string s;
  for (const Tensor& t : args) s += cat(ir::to_string(t.type()), "@", to_string(t.device()), ";");
  return s + (safe ? "|safe|" : "|") + static_key;
}

bool report_recompiles() {
  const char* env = std::getenv("KILN_REPORT_RECOMPILES");
  return env && std::string(env) != "0";
}

// Names what differs between two traced graphs: an input type, or the first
// node whose op or attributes differ.
std::string describe_change(const ir::Graph& before, const ir::Graph& after) {
  size_t n = std::min(before.inputs().size(), after.inputs().size());
  for (size_t i = 0; i < n; ++i) {
    const ir::TypeInfo &a = before.type(before.inputs()[i]), &b = after.type(after.inputs()[i]);
    if (!(a == b)) return cat("input ", i, " changed from ", ir::to_string(a), " to ", ir::to_string(b));
  }
  if (before.inputs().size() != after.inputs().size())
    return cat("the number of inputs changed from ", before.inputs().size(), " to ", after.inputs().size());
  size_t m = std::min(before.nodes().size(), after.nodes().size());
  for (size_t i = 0; i < m; ++i) {
    const ir::Node &a = before.nodes()[i], &b = after.nodes()[i];
    if (a.op != b.op) return cat("node ", i, " is now '", b.op->name, "' (was '", a.op->name, "')");
    for (const auto& [k, v] : b.attrs.items()) {
      const ir::AttrValue* old = a.attrs.find(k);
      if (!old || !(*old == v))
        return cat("node ", i, " ('", b.op->name, "'): attribute ", k, " changed from ",
                   old ? ir::to_string(*old) : "unset", " to ", ir::to_string(v));
    }
  }
  return cat("the graph changed (", before.nodes().size(), " -> ", after.nodes().size(), " nodes)");
}

}  // namespace

namespace {

// What a signature runs once compiled.
struct Built {
  std::shared_ptr<const Executable> exe;     // one program, or
  std::optional<SegmentedProgram> segments;  // the graph split into several

  std::vector<Tensor> run(std::span<const Tensor> inputs, bool replay) const {
    return exe ? exe->run(inputs, replay) : segments->run(inputs, replay);
  }
};

}  // namespace

struct CompiledFunction::Entry {
  std::shared_ptr<Recording> rec;  // the traced graph and its captured constants
  size_t num_args = 0;
  std::shared_ptr<const Built> built;                   // ready, or
  std::shared_future<std::shared_ptr<const Built>> pending;  // building on the compile pool

  // The built programs, waiting for a pending build when `wait`; null when
  // it is still running. A failed build rethrows its error.
  const Built* ready(bool wait) {
    if (!built && pending.valid() &&
        (wait || pending.wait_for(std::chrono::seconds(0)) == std::future_status::ready))
      built = pending.get();
    return built.get();
  }
};

CompiledFunction::CompiledFunction(TensorFn fn, CompileOptions options)
    : fn_(std::move(fn)), options_(std::move(options)) {}

CompiledFunction compile(TensorFn fn, CompileOptions options) {
  return CompiledFunction(std::move(fn), std::move(options));
}

std::vector<ir::TypeInfo> types_of(const std::vector<Tensor>& tensors) {
  std::vector<ir::TypeInfo> types;
  for (const Tensor& t : tensors) types.push_back(t.type());
  return types;
}

std::shared_ptr<Recording> trace(const TensorFn& fn, const std::vector<ir::TypeInfo>& types,
                                 Device device) {
  auto rec = Recording::create();
  std::vector<Tensor> placeholders;
  for (const ir::TypeInfo& t : types) {
    ir::ValueId v = rec->graph.add_input(t);
    rec->captured.push_back(Tensor());  // fed by the caller
    placeholders.push_back(rec->tensor(v, device));
  }
  std::vector<Tensor> outs;
  {
    ContextGuard guard(std::make_shared<TraceContext>(rec));
    outs = fn(placeholders);
  }
  std::vector<ir::ValueId> ids;
  for (const Tensor& t : outs) ids.push_back(rec->value_of(t));
  rec->graph.set_outputs(ids);
  return rec;
}

const Executable& CompiledFunction::last_executable() const {
  KILN_CHECK(last_, options_.name, ": not called yet, so nothing is compiled");
  const Built& b = *last_->ready(/*wait=*/true);
  KILN_CHECK(b.exe, options_.name, ": it runs as ", b.segments->programs().size(),
             " programs (skinny collectives or graph split; last_programs() lists them); "
             "compile it SPMD-safe (CompileOptions::spmd_safe) and without graph_split for one");
  return *b.exe;
}

std::vector<const Executable*> CompiledFunction::last_programs() const {
  KILN_CHECK(last_, options_.name, ": not called yet, so nothing is compiled");
  const Built& b = *last_->ready(/*wait=*/true);
  if (b.exe) return {b.exe.get()};
  return b.segments->programs();
}

CompiledFunction::Entry& CompiledFunction::entry_for(const std::vector<Tensor>& args,
                                                     const std::string& sig) {
  auto it = entries_.find(sig);
  if (it != entries_.end()) return *it->second;

  auto e = std::make_shared<Entry>();
  e->rec = trace(fn_, types_of(args), args.empty() ? kCPU : args[0].device());
  e->num_args = args.size();
  const std::vector<ir::ValueId>& outs = e->rec->graph.outputs();

  ProgramOptions po;
  po.passes = options_.passes;
  po.name = options_.name;
  std::vector<bool> taken(outs.size(), false);
  for (int a : options_.donate) {
    KILN_CHECK(a >= 0 && size_t(a) < args.size(), options_.name, ": donated argument ", a,
               " does not exist (", args.size(), " arguments)");
    for (size_t o = 0; o < outs.size(); ++o) {
      if (taken[o] || !(e->rec->graph.type(outs[o]) == args[a].type())) continue;
      taken[o] = true;
      po.donations.push_back({a, int(o)});
      break;
    }
  }
  Device device = args.empty() ? kCPU : args[0].device();
  const ir::Graph& g = e->rec->graph;
  const std::optional<NodeRanges> ranges = program_segments(g, options_.graph_split, safe_call());
  auto build = [rec = e->rec, ranges, device, po] {
    auto b = std::make_shared<Built>();
    if (ranges) b->segments.emplace(rec->graph, *ranges, device, po);
    else b->exe = get_executable(rec->graph, device, po);
    return std::shared_ptr<const Built>(std::move(b));
  };
  // Only a background build asks the cache first (a segmented check plans every segment).
  auto cached = [&] {
    return ranges ? SegmentedProgram::cached(g, *ranges, device, po) : executable_cached(g, device, po);
  };
  if (options_.compile_in_background && !cached()) {
    auto promise = std::make_shared<std::promise<std::shared_ptr<const Built>>>();
    e->pending = promise->get_future().share();
    submit_compile_job([promise, build] {
      try {
        promise->set_value(build());
      } catch (...) {
        promise->set_exception(std::current_exception());
      }
    });
  } else {
    e->built = build();
  }

  if (report_recompiles() && last_)
    std::cerr << "kiln: recompiling " << options_.name << " (signature " << entries_.size() + 1
              << "): " << describe_change(last_->rec->graph, e->rec->graph) << "\n";
  return *entries_.emplace(sig, e).first->second;
}

bool CompiledFunction::safe_call() const { return options_.spmd_safe || spmd_safe(); }

std::vector<Tensor> CompiledFunction::operator()(std::vector<Tensor> args, const std::string& static_key) {
  for (const Tensor& a : args) KILN_CHECK(a.defined(), options_.name, ": an argument is undefined");
  // Inside another trace the function simply becomes part of that graph.
  if (dynamic_cast<TraceContext*>(&current_context())) return fn_(args);
  std::string sig = signature(args, static_key, safe_call());
  Entry& e = entry_for(args, sig);
  last_ = entries_.at(sig);
  std::vector<Tensor> inputs = e.rec->captured;
  for (size_t i = 0; i < e.num_args; ++i) inputs[i] = std::move(args[i]);
  if (const Built* b = e.ready(/*wait=*/false)) return b->run(inputs, options_.replay);
  // Still compiling: the traced graph op by op, which computes the same bits.
  EagerModeGuard strict(EagerMode::strict);
  return run_graph(e.rec->graph, std::move(inputs), options_.name + " (eager while its program compiles)");
}

}  // namespace kiln
