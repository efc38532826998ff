#include "kiln/runtime/defer.h"

#include <unordered_set>

#include "kiln/base/error.h"
#include "kiln/runtime/backend.h"
#include "kiln/runtime/defer_regions.h"
#include "kiln/runtime/eager.h"
#include "kiln/runtime/program_cache.h"
#include "kiln/runtime/recording.h"
#include "kiln/runtime/spmd.h"
#include "kiln/runtime/view_chain.h"

namespace kiln {
namespace {

thread_local DeferStats t_stats;

class DeferContext final : public Context {
 public:
  std::vector<Tensor> apply(const ir::OpDef& op, std::span<const Tensor> inputs,
                            const ir::Attrs& attrs, std::span<const ir::TypeInfo> out_types,
                            Device device) override {
    // Views of materialized tensors are metadata, as in eager mode.
    if (op.view && inputs.size() == 1 && inputs[0].impl().materialized())
      return eager_context(EagerMode::strict).apply(op, inputs, attrs, out_types, device);
    // Skinny collectives (spmd.h): outside an SPMD-safe scope a collective
    // is a region of its own, flushed before and right after it.
    const bool skinny = is_collective(op) && !spmd_safe();
    if (rec_ && (device != device_ || skinny)) flush();
    if (!rec_) start(device);
    std::vector<Tensor> out = trace_->apply(op, inputs, attrs, out_types, device);
    ++t_stats.ops_recorded;
    for (const Tensor& t : out) pending_.push_back(t.impl_ptr());
    if (skinny) {
      flush();
      ++t_stats.skinny_collectives;
    } else if (RegionCutter::Cut cut = cutter_.note(rec_->graph, rec_->graph.nodes().back());
               cut != RegionCutter::Cut::none) {
      if (cut == RegionCutter::Cut::repeat) ++t_stats.repeat_flushes;
      flush();
    }
    return out;
  }

  // In-place writes keep eager semantics simply: run what is pending, then
  // write into the (now real) buffer, so every view sees the write.
  void assign(const Tensor& dst, const Tensor& value) override {
    flush();
    eager_context(EagerMode::strict).assign(dst, value);
  }

  void materialize(const Tensor& t) override {
    flush();
    KILN_CHECK(t.impl().materialized(), "defer_and_fuse: a ", ir::to_string(t.type()),
               " tensor is pending in a region that was already run without it");
  }

  void flush() {
    if (!rec_) return;
    std::shared_ptr<Recording> rec = std::move(rec_);
    std::vector<std::weak_ptr<TensorImpl>> pending = std::move(pending_);
    rec_.reset();
    trace_.reset();
    pending_.clear();
    cutter_.begin_region();
    rec->owner = nullptr;
    if (rec->graph.nodes().empty()) return;

    // Live values become outputs; live views (those that can alias their
    // base, view_chain.h) are attached to it afterwards instead.
    std::vector<std::shared_ptr<TensorImpl>> outputs, views;
    std::vector<ir::ValueId> ids;
    for (const auto& w : pending) {
      std::shared_ptr<TensorImpl> impl = w.lock();
      if (!impl || impl->recording != rec) continue;
      if (impl->view_base) {
        views.push_back(impl);
        continue;
      }
      outputs.push_back(impl);
      ids.push_back(impl->value);
    }
    bool side_effects = false;
    for (const ir::Node& n : rec->graph.nodes()) side_effects = side_effects || n.op->side_effects;
    if (ids.empty() && !side_effects) return;
    rec->graph.set_outputs(ids);

    ProgramOptions options;
    options.passes = default_pass_options();
    options.name = "deferred ops";
    std::shared_ptr<const Executable> exe = get_executable(rec->graph, device_, options);
    std::vector<Tensor> results = exe->run(rec->captured);
    // Pending tensors are distinct buffers, as in strict mode, but the
    // program may return one value for several of them (CSE merged equal
    // values) or an input as an output (simplify forwarded it): an in-place
    // write into one would then show in the other. Copy such outputs, each
    // in its pool: an offloaded activation stays in host memory.
    std::unordered_set<const Storage*> taken;
    for (const Tensor& c : rec->captured) taken.insert(c.impl().storage.get());
    for (Tensor& r : results)
      if (!taken.insert(r.impl().storage.get()).second) {
        Tensor copy = new_tensor(r.type(), r.device(), r.impl().storage->pool);
        eager_context(EagerMode::strict).assign(copy, r);
        r = copy;
      }
    for (size_t i = 0; i < outputs.size(); ++i) {
      const TensorImpl& r = results[i].impl();
      TensorImpl& impl = *outputs[i];
      impl.storage = r.storage;
      impl.strides = r.strides;
      impl.offset = r.offset;
      release(impl);
    }
    for (const auto& impl : views) {
      const TensorImpl& root = chain_root(*impl);
      ir::Layout l = *chain_layout(*impl);
      impl->storage = root.storage;
      impl->strides = l.strides;
      impl->offset = l.offset;
      release(*impl);
    }
    ++t_stats.flushes;
    t_stats.last_region_ops = rec->graph.nodes().size();
    t_stats.last_region_outputs = ids.size();
  }

 private:
  static void release(TensorImpl& impl) {
    impl.recording.reset();
    impl.value = -1;
    impl.view_base.reset();
    impl.view_op = nullptr;
  }

  void start(Device device) {
    rec_ = Recording::create();
    rec_->owner = this;
    trace_ = std::make_unique<TraceContext>(rec_);
    device_ = device;
  }

  std::shared_ptr<Recording> rec_;
  std::unique_ptr<TraceContext> trace_;
  std::vector<std::weak_ptr<TensorImpl>> pending_;
  Device device_;
  RegionCutter cutter_;
};

DeferContext& defer() {
  static thread_local DeferContext ctx;
  return ctx;
}

}  // namespace

Context& defer_context() { return defer(); }

void eval(const std::vector<Tensor>& tensors) {
  defer().flush();
  for (const Tensor& t : tensors) ensure_materialized(t);
}

DeferStats defer_stats() { return t_stats; }
void reset_defer_stats() { t_stats = {}; }

}  // namespace kiln
