#include "kiln/runtime/defer.h"

#include <unordered_map>
#include <unordered_set>

#include "kiln/base/error.h"
#include "kiln/runtime/dispatch.h"
#include "kiln/runtime/eager.h"
#include "kiln/runtime/program_cache.h"
#include "kiln/runtime/recording.h"
#include "kiln/runtime/spmd.h"
#include "kiln/runtime/view_chain.h"

namespace kiln {
namespace {

// Regions longer than this flush even without a repeat, bounding host memory.
constexpr size_t kMaxRegionOps = 4096;
// The shortest op sequence the repeat heuristic treats as a block.
constexpr size_t kMinBlockOps = 16;
constexpr uint64_t kHashBase = 0x100000001b3ull;

thread_local DeferStats t_stats;

// A node's identity for the repeat heuristic: op, attributes, input types.
uint64_t node_signature(const ir::Graph& g, const ir::Node& n) {
  uint64_t h = std::hash<std::string>{}(n.op->name);
  auto mix = [&](uint64_t v) { h = (h ^ v) * kHashBase + 0x9e3779b97f4a7c15ull; };
  for (const auto& [k, v] : n.attrs.items()) mix(std::hash<std::string>{}(k + ir::to_string(v)));
  for (ir::ValueId v : n.inputs) {
    const ir::TypeInfo& t = g.type(v);
    mix(uint64_t(t.dtype));
    for (int64_t d : t.shape) mix(uint64_t(d));
  }
  return h;
}

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
    } else {
      note_node();
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
    hashes_.clear();
    seen_.clear();
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
    // write into one would then show in the other. Copy such outputs.
    std::unordered_set<const Storage*> taken;
    for (const Tensor& c : rec->captured) taken.insert(c.impl().storage.get());
    for (Tensor& r : results)
      if (!taken.insert(r.impl().storage.get()).second) {
        EagerModeGuard strict(EagerMode::strict);
        r = apply1(KILN_OP("copy"), {r});
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

  // Repeated-sequence heuristic. hashes_[i] is a rolling hash of the first i
  // node signatures, so any two ranges compare in O(1). When the newest node
  // repeats an earlier one p nodes back and the last p nodes equal the p
  // before them (p >= kMinBlockOps), those p nodes are a block: the region
  // flushes, and later regions flush as soon as they hold one such block.
  void note_node() {
    const ir::Graph& g = rec_->graph;
    size_t n = g.nodes().size();
    uint64_t sig = node_signature(g, g.nodes().back());
    if (hashes_.empty()) hashes_.push_back(0);
    hashes_.push_back(hashes_.back() * kHashBase + sig);
    while (powers_.size() <= n) powers_.push_back(powers_.empty() ? 1 : powers_.back() * kHashBase);
    auto range = [&](size_t a, size_t b) { return hashes_[b] - hashes_[a] * powers_[b - a]; };

    bool repeat = learned_size_ && n == learned_size_ && hashes_[n] == learned_hash_;
    std::vector<size_t>& earlier = seen_[sig];
    for (size_t k = earlier.size(); k-- > 0 && !repeat && earlier.size() - k <= 4;) {
      size_t p = n - 1 - earlier[k];
      if (p >= kMinBlockOps && n >= 2 * p && range(n - p, n) == range(n - 2 * p, n - p)) {
        learned_size_ = p;
        learned_hash_ = range(n - p, n);
        repeat = true;
      }
    }
    earlier.push_back(n - 1);
    if (repeat) ++t_stats.repeat_flushes;
    if (repeat || n >= kMaxRegionOps) flush();
  }

  std::shared_ptr<Recording> rec_;
  std::unique_ptr<TraceContext> trace_;
  std::vector<std::weak_ptr<TensorImpl>> pending_;
  Device device_;
  std::vector<uint64_t> hashes_, powers_;
  std::unordered_map<uint64_t, std::vector<size_t>> seen_;  // signature -> node indices
  size_t learned_size_ = 0;  // nodes in the repeating block, once learned
  uint64_t learned_hash_ = 0;
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
